"""gke-tpu-slicing: TPU7x dynamic slicing on GKE as one Pulumi dependency graph.

Modules: `geometry` and `settings` are plain Python (no resources); every other module is one
concern of the deployment as a `pulumi.ComponentResource`.
"""
