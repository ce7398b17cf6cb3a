"""TPU geometry, the reservation's sub-blocks, the Slices on a pool, the capacity planner (pure)."""
