"""Tasks: Harbor's format (native) and Terminal-Bench 1.x's (read, or imported into Harbor's)::

    from terminal_env.tasks import build_image, load_task

    task = load_task("tests/data/tasks/harbor-sum")   # validated once; TaskFormatError lists all
    image = build_image(task)                        # cached by content: a hit is one API call
    spec = task.to_spec(image)                       # what TerminalEnv runs
"""

from .build import build_image, ca_env, image_tag, plan_build
from .load import find_tasks, load_task, read_task, validate
from .model import Task
from .schema import Problem, TaskFormatError
from .tb1_import import import_tb1, import_tb1_folder

__all__ = [
    "Problem", "Task", "TaskFormatError", "build_image", "ca_env", "find_tasks", "image_tag",
    "import_tb1", "import_tb1_folder", "load_task", "plan_build", "read_task", "validate",
]
