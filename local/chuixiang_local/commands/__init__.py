"""The commands: cook, serve, cloud, invoke, seed, bench, ladder, cost (``chuixiang --help``)."""
