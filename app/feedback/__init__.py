"""The weekly feedback job: accepted at once, written by the chat's LLM in the background,
delivered by callback and on a results stream (SPEC "Feedback", README "Feedback").

    models.py, dates.py      the request as the backend sends it; dates made aware (Asia/Seoul)
    summary.py               the member's last 7 days in numbers (code, not the model)
    prompt.py, text.py       the prompt and fallback text; the validator of the model's text
    generator.py             one text through the chat's upstream pool, chat first
    delivery.py              one callback attempt and the backoff
    records.py, redis_records.py   job records, idempotency keys, the results log
    runner.py                what a job does: generate, publish once, deliver
    queue_memory.py, queue_saq.py  who runs jobs: in process, or saq on Redis
    service.py               accept / look up; built for the lifespan
    worker.py                ``python -m app.feedback.worker`` for scale-out
"""
