"""Siteward's crawl engine: a pure library with no Django in it.

The Django app (``audits``) is the only place that turns what this library
produces into rows; everything here can be tested without a database.
"""
