"""Adaptation: how a scenario's instances become model requests, as HELM's adapters do.

- spec.py: the adapter spec (method, decoding, prompt layout) and the suite conventions;
- methods/: one module per adapter method (generation, multiple_choice_joint, the separate multiple-choice
  methods, ranking_binary, language_modeling) behind one lookup, `adapter_method(name)`;
- adapter.py: rendering and fitting prompts to the context window, and building the requests;
- examples.py: the seeded draw of in-context examples (HELM's, step for step);
- templating.py: the sandboxed, bounded Jinja2 every template and catalog expression is rendered with.
"""
