"""The ``Request.meta`` / ``Response.meta`` keys this package sets, named once."""

#: the ChangeResult of the response, for the spider (docs/scheduler.md)
META_RESULT = "recrawl"
#: the cycle that scheduled the request
META_CYCLE = "recrawl_cycle"
#: the recrawl's URL id, its rank in the cycle's selection and its score
META_ID = "recrawl_id"
META_RANK = "recrawl_rank"
META_SCORE = "recrawl_score"
