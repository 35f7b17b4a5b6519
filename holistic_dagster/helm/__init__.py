"""Results exchange with HELM (crfm-helm 0.5): its run folders imported into the warehouse as model partitions
(importing.py), and a suite version's results written as HELM run folders that HELM's own tools read
(exporting.py). runs.py reads and checks HELM's files; names.py maps HELM's names to ours and back."""
