"""Serving language models token by token: engines that stream tokens, LoadGen in token mode, token figures.

An engine (:mod:`.engines`) owns its weights and its scheduling and streams each request's tokens to a sink;
the LoadGen SUT (:mod:`.sut`) forwards the first token (``FirstTokenComplete``) and the completion with its
token count, so LoadGen itself measures time to first token and time per output token.
"""
