"""The in-process usage writer's task ends when its loop cancels it, even in
the turn that wakes it: ``asyncio.run`` (``manage.py model_check``) waits for
every task it cancels, and a task that swallowed its cancellation kept it
waiting forever."""

import asyncio
import contextlib

from responses_api.usage.sink import UsageSink


def test_the_writer_task_ends_when_cancelled_in_the_turn_that_wakes_it(settings):
    settings.REDIS_URL = ""

    async def main() -> bool:
        sink = UsageSink()
        sink._ensure_task()
        task, _ = sink._writers[asyncio.get_running_loop()]
        await asyncio.sleep(0.01)  # the task now waits to be woken
        sink._wake_writer()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await asyncio.wait_for(asyncio.shield(task), 2.0)
        return task.cancelled()

    assert asyncio.run(main())
