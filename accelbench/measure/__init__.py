"""How a number is measured: timers, statistics, and the conditions a measurement ran under."""
