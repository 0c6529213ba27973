"""What a stage asks of the model and how its answer becomes a recipe or a picture."""
