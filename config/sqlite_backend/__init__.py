"""Django's SQLite backend with two costs of the crawl's bulk writes taken out (see base.py)."""
