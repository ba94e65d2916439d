"""bouncerctl: the person's command line for bouncerd."""
