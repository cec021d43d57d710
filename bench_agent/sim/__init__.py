"""The simulated bench: a board whose console boots, a Shelly plug that powers it, and a launcher."""
