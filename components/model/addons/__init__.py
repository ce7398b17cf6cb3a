"""What the program sets on the add-ons: Kueue's values, the slice controller's gates (pure)."""
