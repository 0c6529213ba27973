"""An evening at scale, simulated (``bench/evening.py``): arrivals through the evening against what binds."""
