"""gke-tpu-slicing: TPU7x dynamic slicing on GKE, declared as one dependency graph.

Bad configuration stops in `load_settings`, before the first resource is registered; the graph itself is
`components/graph.py`.
"""

import pulumi

from components.graph import declare_stack
from components.preflight import load_settings, offline_run, require_cli

require_cli()
for name, value in declare_stack(load_settings(), offline=offline_run()).items():
    pulumi.export(name, value)
