"""Django 5 with the postgresql backend (psycopg 3): settings configured in code, one app
(tests/apps/ledger) with two models, `migrate --run-syncdb` for it, the ORM's create,
filter, update, delete and aggregate, and nested transaction.atomic() blocks (savepoints).
No contrib app: they need foreign keys."""

import datetime
import decimal
import io

import django
from django.conf import settings

from common import DB, HOST, PORT, USER, check, run

settings.configure(
    DEBUG=False,
    USE_TZ=True,
    TIME_ZONE="UTC",
    INSTALLED_APPS=["ledger"],
    DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    DATABASES={
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": DB,
            "USER": USER,
            "HOST": HOST,
            "PORT": PORT,
        }
    },
)
django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import IntegrityError, connection, transaction  # noqa: E402
from django.db.models import Count, F, Max, Q, Sum  # noqa: E402
from django.db.models.fields.json import KT  # noqa: E402

from ledger.models import Account, Entry  # noqa: E402

D = decimal.Decimal


def scenario():
    with connection.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS ledger_account, ledger_entry, django_migrations")
    out = io.StringIO()
    call_command("migrate", "--run-syncdb", verbosity=1, stdout=out, interactive=False)
    tables = connection.introspection.table_names()
    check({"ledger_account", "ledger_entry"} <= set(tables), True, f"tables after migrate {tables}")

    opened = datetime.datetime(2024, 3, 4, 5, 6, 7, tzinfo=datetime.timezone.utc)
    alice = Account.objects.create(name="alice", balance=D("100.00"), opened=opened)
    bob = Account.objects.create(name="bob", opened=opened, active=False)
    # bulk_create: with several rows Django 5.2 inserts them from unnest() of one array per
    # column (varchar[], numeric[], timestamptz[], ...), RETURNING the new keys.
    made = Account.objects.bulk_create(
        [Account(name=f"acct{i}", opened=opened, balance=D(i)) for i in range(5)]
    )
    check(all(a.pk is not None for a in made), True, "bulk_create returns the keys")
    check(Account.objects.count(), 7, "create")
    check(Account.objects.get(pk=alice.pk).opened, opened, "DateTimeField round trip")
    check(bob.balance, 0, "default")

    for amount in ["10.50", "-3.25", "7.00"]:
        Entry.objects.create(account_id=alice.pk, amount=D(amount), memo="pay")
    Entry.objects.create(account_id=bob.pk, amount=D("1.00"))
    check(Entry.objects.filter(account_id=alice.pk, amount__gt=0).count(), 2, "filter")
    # JSONField (jsonb): key, index and nested lookups, containment, has_key, KT().
    Entry.objects.create(account_id=bob.pk, amount=D("2.00"),
                         details={"kind": "card", "tags": ["a", "b"], "meta": {"risk": 3, "ok": True}})
    Entry.objects.create(account_id=bob.pk, amount=D("3.00"), details={"kind": "cash", "tags": []})
    with_details = Entry.objects.exclude(details={})
    check(with_details.count(), 2, "JSONField exclude empty")
    check(Entry.objects.get(details__kind="card").details["meta"], {"risk": 3, "ok": True}, "JSONField round trip")
    check(Entry.objects.filter(details__meta__risk__gte=2).count(), 1, "JSONField nested key lookup")
    check(Entry.objects.filter(details__tags__0="a").count(), 1, "JSONField index lookup")
    check(Entry.objects.filter(details__contains={"tags": ["b"]}).count(), 1, "JSONField contains")
    check(with_details.filter(details__contained_by={"kind": "cash", "tags": [], "x": 1}).count(), 1,
          "JSONField contained_by")
    check(Entry.objects.filter(details__has_key="meta").count(), 1, "JSONField has_key")
    check(Entry.objects.filter(details__has_any_keys=["meta", "tags"]).count(), 2, "JSONField has_any_keys")
    check(list(with_details.annotate(kind=KT("details__kind")).order_by("kind").values_list("kind", flat=True)),
          ["card", "cash"], "JSONField KT annotation")
    Entry.objects.filter(details__kind="cash").update(details={"kind": "cash", "void": None})
    check(Entry.objects.filter(details__void__isnull=False).count(), 1, "JSONField JSON null key")
    Entry.objects.filter(details__has_key="kind").delete()
    check(list(Account.objects.filter(Q(active=False) | Q(name__startswith="al")).order_by("name")
               .values_list("name", flat=True)), ["alice", "bob"], "Q objects")
    check(list(Account.objects.filter(name__icontains="ACCT").exclude(balance__lt=3)
               .values_list("name", flat=True).order_by("-name")), ["acct4", "acct3"], "icontains/exclude")

    totals = Entry.objects.values("account_id").annotate(n=Count("id"), total=Sum("amount")).order_by("account_id")
    check([(t["account_id"], t["n"], t["total"]) for t in totals],
          [(alice.pk, 3, D("14.25")), (bob.pk, 1, D("1.00"))], "aggregate by group")
    check(Account.objects.aggregate(total=Sum("balance"), top=Max("balance")),
          {"total": D("110.00"), "top": D("100.00")}, "aggregate")

    check(Account.objects.filter(name__startswith="acct").update(balance=F("balance") * 2), 5, "update with F")
    check(Account.objects.get(name="acct4").balance, D("8.00"), "updated value")
    deleted, _ = Account.objects.filter(name__in=["acct0", "acct1"]).delete()
    check(deleted, 2, "delete")

    # Nested atomic blocks: the inner ones are savepoints.
    with transaction.atomic():
        Account.objects.filter(pk=alice.pk).update(balance=F("balance") - 10)
        try:
            with transaction.atomic():
                Account.objects.filter(pk=bob.pk).update(balance=F("balance") + 10)
                Account.objects.create(name="alice", opened=opened)  # unique violation
        except IntegrityError:
            pass
        with transaction.atomic():
            Entry.objects.create(account_id=alice.pk, amount=D("-10"), memo="transfer")
    check(Account.objects.get(pk=alice.pk).balance, D("90.00"), "outer atomic kept")
    check(Account.objects.get(pk=bob.pk).balance, D("0.00"), "inner atomic rolled back")
    check(Entry.objects.filter(memo="transfer").count(), 1, "second savepoint kept")
    try:
        with transaction.atomic():
            Entry.objects.all().delete()
            raise RuntimeError("roll back")
    except RuntimeError:
        pass
    check(Entry.objects.count(), 5, "atomic rolled back on exception")

    with connection.cursor() as cur:
        cur.execute("DROP TABLE ledger_account, ledger_entry")
        cur.execute("DROP TABLE IF EXISTS django_migrations")


run("django5", scenario)
