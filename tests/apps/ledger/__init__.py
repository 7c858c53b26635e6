"""The Django app of the django5 scenario: two models without foreign keys."""
