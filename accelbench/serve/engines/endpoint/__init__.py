"""``--engine endpoint``: a client of any OpenAI-compatible server (the system under test runs elsewhere)."""
