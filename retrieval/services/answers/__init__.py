"""Grounded answers: a question answered from a collection's passages, citing them.

See :mod:`retrieval.services.answers.service`; the records are in
:mod:`~retrieval.services.answers.records`.
"""
