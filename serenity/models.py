"""The project's own tables: request-limit budgets (serenity/limits.py)."""

from django.db import models


class RateLimit(models.Model):
    """One budget: `tat`, the time (epoch seconds) the budget is spent up to (GCRA). Written only by the
    conditional upsert of serenity.limits.charge."""

    key = models.CharField(max_length=80, primary_key=True, help_text="scope:hashed identity")
    tat = models.FloatField()

    class Meta:
        db_table = "serenity_rate_limit"

    def __str__(self):
        return self.key
