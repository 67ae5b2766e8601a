"""Reads that several faces share (the REST API, the admin, the commands).

Writes go through ``sessiontree.services``; these only read, through the
provider contract, never the ORM for tree semantics.
"""
