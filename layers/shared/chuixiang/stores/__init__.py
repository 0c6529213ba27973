"""Where state lives: the jobs table (jobs, recipe cache), the images bucket, the model key."""
