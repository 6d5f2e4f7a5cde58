"""The machine a result was measured on: profile, fingerprint and peak figures."""
