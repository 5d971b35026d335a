"""What minidet adds to the training engine: its hooks."""
