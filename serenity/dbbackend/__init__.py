"""PostgreSQL through Django's own backend, with every connection the pool hands out tested before use
(serenity/dbbackend/base.py)."""
