"""Load tests: Locust users that act as real apps, and the one command that runs them."""
