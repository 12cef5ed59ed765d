"""The autoscheduler: a genetic search over schedule traces, measured and recorded.

    result = sched.tune(func, target="c", trials=256, db="tune.db")
"""
