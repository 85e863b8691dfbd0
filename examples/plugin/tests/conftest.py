# the test kit's fixtures, found by pytest here (scrapy_recrawl.testing)
from scrapy_recrawl.testing import sqlite_store  # noqa: F401
