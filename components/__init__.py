"""gke-tpu-slicing: TPU7x dynamic slicing on GKE as one Pulumi dependency graph.

Layout: `model/` is plain Python (settings, geometry, planner: no resources), `cli/` holds the
`python -m components` commands, and every other module is one
concern of the deployment as a `pulumi.ComponentResource`.
"""
