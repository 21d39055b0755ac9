"""First-party delegate plugins; each registers through the `acelera.delegates` entry point."""
