"""Configuration: every YAML schema and the one object that owns every path.

- schema.py: reading and validating YAML (errors name the file and the key); redaction.py: secrets read from the
  environment and kept out of every error, log and stored text;
- catalog.py: the suites and the Catalog (scenario specs are declared in scenarios/spec.py, adapter specs in
  adaptation/spec.py, format options in scenarios/formats/: the catalog validates against them);
- models.py: the model registry and the settings per backend kind;
- alerts.py, shadow.py, scaleout.py, automation.py: the deployment's other files;
- deployment.py: Deployment, where the catalog, the resources/*.yaml files, the warehouse, the working folder, the
  data folders and Dagster's home are; everything that needs a path or a configuration file builds from it.
"""
