from django.db import models


class Account(models.Model):
    name = models.CharField(max_length=50, unique=True)
    balance = models.DecimalField(max_digits=12, decimal_places=2, default=0)
    opened = models.DateTimeField()
    active = models.BooleanField(default=True)

    class Meta:
        app_label = "ledger"


class Entry(models.Model):
    # The account by its id, not a ForeignKey (quire has no FOREIGN KEY yet).
    account_id = models.IntegerField(db_index=True)
    amount = models.DecimalField(max_digits=12, decimal_places=2)
    memo = models.CharField(max_length=200, blank=True, default="")
    at = models.DateTimeField(auto_now_add=True)
    # jsonb: Django's JSONField.
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        app_label = "ledger"
        indexes = [models.Index(fields=["account_id", "at"], name="ledger_entry_acct_at")]
