"""SQLAlchemy 2 with psycopg 3: the engine's first connect (it asks for the isolation level,
the version and standard_conforming_strings), metadata.create_all (a foreign key among the
tables), Core inserts and selects, the ORM's add/commit/query/update/delete, begin_nested
(savepoints), reflection through the inspector, and metadata.drop_all."""

import datetime
import decimal

from sqlalchemy import (
    Boolean,
    Column,
    ForeignKey,
    DateTime,
    Float,
    Identity,
    Index,
    Integer,
    MetaData,
    Numeric,
    String,
    Table,
    Text,
    create_engine,
    delete,
    func,
    insert,
    inspect,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from common import check, run, sqlalchemy_url


class Base(DeclarativeBase):
    pass


class Person(Base):
    __tablename__ = "apps_person"
    id: Mapped[int] = mapped_column(Integer, Identity(), primary_key=True)
    name: Mapped[str] = mapped_column(String(50), index=True)
    height: Mapped[float] = mapped_column(Float, nullable=True)
    balance: Mapped[decimal.Decimal] = mapped_column(Numeric(10, 2), default=decimal.Decimal("0"))
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    joined: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), nullable=True)
    notes: Mapped[str] = mapped_column(Text, nullable=True)


class Book(Base):
    __tablename__ = "apps_book"
    id: Mapped[int] = mapped_column(Integer, Identity(), primary_key=True)
    title: Mapped[str] = mapped_column(String(50))
    person_id: Mapped[int] = mapped_column(ForeignKey("apps_person.id", ondelete="CASCADE"))


def scenario():
    engine = create_engine(sqlalchemy_url())
    metadata = MetaData()
    events = Table(
        "apps_event",
        metadata,
        Column("id", Integer, Identity(), primary_key=True),
        Column("kind", String(50), nullable=False),
        Column("weight", Float),
        Column("amount", Numeric(10, 2)),
        Column("ok", Boolean, server_default="true"),
        Column("at", DateTime(timezone=True)),
        Column("body", Text),
        Column("attrs", JSONB),
        Index("apps_event_kind_at", "kind", "at"),
    )
    Base.metadata.drop_all(engine)
    metadata.drop_all(engine)
    metadata.create_all(engine)
    Base.metadata.create_all(engine)

    at = datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    # Core.
    with engine.begin() as conn:
        conn.execute(
            insert(events),
            [
                {"kind": "a", "weight": 1.5, "amount": decimal.Decimal("10.25"), "at": at, "body": "x",
                 "attrs": {"color": "red", "sizes": [1, 2]}},
                {"kind": "b", "weight": None, "amount": decimal.Decimal("-3.10"), "at": None, "body": None, "attrs": None},
                {"kind": "a", "weight": 2.25, "amount": decimal.Decimal("0.05"), "at": at, "body": "y" * 1000, "attrs": None},
            ],
        )
        result = conn.execute(insert(events).values(kind="c").returning(events.c.id, events.c.ok))
        new_id, ok = result.one()
        check(ok, True, "server default via RETURNING")
        rows = conn.execute(
            select(events.c.kind, func.count(), func.sum(events.c.amount))
            .group_by(events.c.kind)
            .order_by(events.c.kind)
        ).all()
        check(
            [tuple(r) for r in rows],
            [("a", 2, decimal.Decimal("10.30")), ("b", 1, decimal.Decimal("-3.10")), ("c", 1, None)],
            "Core group by",
        )
        conn.execute(update(events).where(events.c.id == new_id).values(weight=events.c.id * 2.0))
        check(conn.execute(select(events.c.weight).where(events.c.id == new_id)).scalar_one(), new_id * 2.0, "update")
        check(conn.execute(select(events.c.at).where(events.c.kind == "a").limit(1)).scalar_one(), at, "timestamptz")
        attrs = events.c.attrs
        check(conn.execute(select(attrs["color"].astext).where(attrs.contains({"sizes": [2]}))).scalar_one(),
              "red", "JSONB ->> and @>")
        check(conn.execute(select(attrs[("sizes", 1)]).where(attrs.has_key("color"))).scalar_one(), 2,
              "JSONB #> path and ?")
        conn.execute(delete(events).where(events.c.kind == "c"))
        check(conn.execute(select(func.count()).select_from(events)).scalar_one(), 3, "delete")

    # ORM.
    with Session(engine) as session:
        session.add_all(
            [
                Person(name="ada", height=1.65, balance=decimal.Decimal("100.50"), joined=at),
                Person(name="bob", height=None, notes="no height"),
                Person(name="cy", height=1.8, active=False),
            ]
        )
        session.commit()
        ada = session.scalars(select(Person).where(Person.name == "ada")).one()
        check((ada.balance, ada.active, ada.joined), (decimal.Decimal("100.50"), True, at), "ORM round trip")
        ada.balance += decimal.Decimal("0.25")
        session.commit()
        check(session.get(Person, ada.id).balance, decimal.Decimal("100.75"), "ORM update")

        # A savepoint rolled back, one committed.
        nested = session.begin_nested()
        session.add(Person(name="ghost"))
        session.flush()
        nested.rollback()
        with session.begin_nested():
            session.add(Person(name="dee"))
        session.commit()
        names = session.scalars(select(Person.name).order_by(Person.name)).all()
        check(names, ["ada", "bob", "cy", "dee"], "begin_nested")

        # The legacy Query API too.
        check(session.query(Person).filter(Person.active.is_(False)).count(), 1, "Query.count")
        session.query(Person).filter(Person.name == "bob").update({Person.height: 1.7})
        session.delete(session.scalars(select(Person).where(Person.name == "cy")).one())
        session.commit()
        check(round(session.query(func.sum(Person.height)).scalar(), 6), 3.35, "sum of floats")
        check(session.query(Person).count(), 3, "ORM delete")

    # Reflection.
    insp = inspect(engine)
    tables = insp.get_table_names()
    check({"apps_event", "apps_person"} <= set(tables), True, f"get_table_names {tables}")
    columns = {c["name"]: c for c in insp.get_columns("apps_event")}
    check(list(columns), ["id", "kind", "weight", "amount", "ok", "at", "body", "attrs"], "get_columns names")
    check(str(columns["kind"]["type"]), "VARCHAR(50)", "String(50)")
    check(columns["kind"]["nullable"], False, "NOT NULL")
    check(str(columns["amount"]["type"]), "NUMERIC(10, 2)", "Numeric(10, 2)")
    check(str(columns["at"]["type"]), "TIMESTAMP", "DateTime")
    check(columns["at"]["type"].timezone, True, "DateTime(timezone=True)")
    check(str(columns["weight"]["type"]), "DOUBLE PRECISION", "Float")
    check(str(columns["body"]["type"]), "TEXT", "Text")
    check(str(columns["attrs"]["type"]), "JSONB", "JSONB reflected")
    check(columns["ok"]["default"], "true", "server default")
    check(columns["id"].get("identity", {}).get("start"), 1, "identity column")
    check(insp.get_pk_constraint("apps_event")["constrained_columns"], ["id"], "get_pk_constraint")
    indexes = [(i["name"], i["column_names"], i["unique"]) for i in insp.get_indexes("apps_event")]
    check(indexes, [("apps_event_kind_at", ["kind", "at"], False)], "get_indexes")
    reflected = Table("apps_event", MetaData(), autoload_with=engine)
    check([c.name for c in reflected.primary_key], ["id"], "Table(autoload_with=...) primary key")
    check(sorted(i.name for i in reflected.indexes), ["apps_event_kind_at"], "Table(autoload_with=...) indexes")
    check(insp.get_foreign_keys("apps_event"), [], "get_foreign_keys (none)")
    fks = insp.get_foreign_keys("apps_book")
    check(
        [(f["constrained_columns"], f["referred_table"], f["referred_columns"], f["options"]) for f in fks],
        [(["person_id"], "apps_person", ["id"], {"ondelete": "CASCADE"})],
        "get_foreign_keys",
    )

    # Foreign keys at work: a missing key refused, a deleted one cascading.
    with Session(engine) as session:
        owner = session.scalars(select(Person.id).order_by(Person.id)).first()
        session.add(Book(title="notes", person_id=owner))
        session.commit()
        session.add(Book(title="orphan", person_id=-1))
        try:
            session.commit()
            check("committed", "23503", "a book without its person")
        except IntegrityError as e:
            session.rollback()
            check(e.orig.sqlstate, "23503", "a book without its person")
        session.execute(delete(Person).where(Person.id == owner))
        session.commit()
        check(session.query(Book).count(), 0, "ON DELETE CASCADE")
    check(insp.has_table("apps_person"), True, "has_table")
    check(insp.has_table("apps_nothing"), False, "has_table (missing)")

    metadata.drop_all(engine)
    Base.metadata.drop_all(engine)
    check(inspect(engine).has_table("apps_event"), False, "drop_all")
    engine.dispose()


run("sqlalchemy2", scenario)
