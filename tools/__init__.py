"""Developer tools run by the Makefile (`make lint`); never imported by app/, worker/ or grpo/."""
