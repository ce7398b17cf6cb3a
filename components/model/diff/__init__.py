"""The change preview's model: what each provider replaces, what each API refuses, what it stores. Pure data."""
