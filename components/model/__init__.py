"""The pure model: settings, TPU geometry and the capacity planner. No Pulumi imports here."""
