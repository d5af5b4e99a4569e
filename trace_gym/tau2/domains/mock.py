"""τ²-bench ``mock`` domain: users with tasks (agent side) and a notification inbox (user side)."""

from __future__ import annotations

from typing import Any

from trace_gym.tau2.domain_spec import DomainSpec
from trace_gym.tau2.toolkit import Model, Toolkit, tool
from trace_gym.tau2.validation import OPT_STR, STR, Field, build, literal

from ._records import conform, conform_map

_TASK_FIELDS = {
    "task_id": Field(STR),
    "title": Field(STR),
    "description": Field(OPT_STR, default=None),
    "status": Field(literal("pending", "completed")),
}
_NOTIFICATION_FIELDS = {
    "notification_id": Field(STR),
    "message": Field(STR),
    "status": Field(literal("unread", "read"), default="unread"),
    "task_id": Field(OPT_STR, default=None),
}

_TASK_ORDER = {"task_id": ..., "title": ..., "description": None, "status": ...}
_USER_ORDER = {"user_id": ..., "name": ..., "tasks": ...}
_NOTIFICATION_ORDER = {"notification_id": ..., "message": ..., "status": "unread", "task_id": None}


class MockTools(Toolkit):
    """Agent tools of the mock domain."""

    @tool("write")
    def create_task(self, user_id: str, title: str, description: str = None) -> Any:  # type: ignore[assignment]
        if user_id not in self.db.users:
            raise ValueError(f"User {user_id} not found")
        task_id = f"task_{len(self.db.tasks) + 1}"
        task = build("Task", _TASK_FIELDS,
                     {"task_id": task_id, "title": title, "description": description, "status": "pending"})
        self.db.put("tasks", task_id, task)
        self.db.own("users", user_id)["tasks"].append(task_id)
        return Model(task)

    @tool("read")
    def get_users(self) -> Any:
        return [Model(u) for u in self.db.users.values()]

    @tool("write")
    def update_task_status(self, task_id: str, status: str) -> Any:
        if task_id not in self.db.tasks:
            raise ValueError(f"Task {task_id} not found")
        task = self.db.own("tasks", task_id)
        task["status"] = status  # tau2 assigns without validation
        return Model(task)

    def assert_number_of_tasks(self, user_id: str, expected_number: int) -> bool:
        """Env assertion: the user has ``expected_number`` tasks."""
        if user_id not in self.db.users:
            raise ValueError(f"User {user_id} not found")
        return len(self.db.users[user_id]["tasks"]) == expected_number

    def assert_task_status(self, task_id: str, expected_status: str) -> bool:
        """Env assertion: the task has the given status."""
        if task_id not in self.db.tasks:
            raise ValueError(f"Task {task_id} not found")
        return self.db.tasks[task_id]["status"] == expected_status

    @tool("generic")
    def transfer_to_human_agents(self, summary: str) -> str:
        return "Transfer successful"


class MockUserTools(Toolkit):
    """User tools of the mock domain: a notification inbox."""

    @tool("read")
    def check_notifications(self) -> Any:
        return [Model(n) for n in self.db.notifications.values()]

    @tool("write")
    def dismiss_notification(self, notification_id: str) -> str:
        if notification_id not in self.db.notifications:
            raise ValueError(f"Notification {notification_id} not found")
        self.db.own("notifications", notification_id)["status"] = "read"
        return f"Notification {notification_id} dismissed"

    def add_notification(self, notification_id: str, message: str, task_id: str | None = None) -> Any:
        """Init action: put an unread notification in the inbox."""
        note = build("Notification", _NOTIFICATION_FIELDS,
                     {"notification_id": notification_id, "message": message, "task_id": task_id})
        self.db.put("notifications", notification_id, note)
        return Model(note)

    def assert_notification_status(self, notification_id: str, expected_status: str) -> bool:
        """Env assertion: the notification has the given status."""
        if notification_id not in self.db.notifications:
            raise ValueError(f"Notification {notification_id} not found")
        return self.db.notifications[notification_id]["status"] == expected_status


def normalise_db(raw: dict[str, Any]) -> dict[str, Any]:
    return {
        "tasks": conform_map(raw, "tasks", _TASK_ORDER, "MockDB"),
        "users": conform_map(raw, "users", _USER_ORDER, "MockDB"),
    }


def normalise_user_db(raw: dict[str, Any]) -> dict[str, Any]:
    notes = raw.get("notifications", {})
    return {"notifications": {k: conform(v, _NOTIFICATION_ORDER, f"MockUserDB.notifications.{k}") for k, v in notes.items()}}


DOMAIN = DomainSpec(
    name="mock",
    tools_cls=MockTools,
    db_model="MockDB",
    db_file="db.json",
    normalise_db=normalise_db,
    user_tools_cls=MockUserTools,
    user_db_model="MockUserDB",
    user_db_file="user_db.json",
    normalise_user_db=normalise_user_db,
)
