"""This project's database backends: Django's MySQL/MariaDB and SQLite
backends whose failures are typed (``providers/db_errors.py``) and whose lone
reads outside a transaction are retried after a lost connection. Settings
select them for ``django.db.backends.mysql`` and ``django.db.backends.sqlite3``."""
