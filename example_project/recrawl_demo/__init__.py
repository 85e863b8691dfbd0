"""The Scrapy project of the example: one spider, ``site``, for the local test site."""
