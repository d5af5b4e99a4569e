"""Two small retail-like trajectories and two capabilities, shared by the LLM-labeler test and its recorder."""

from trace_gym.analysis.labelers import LabelingItem
from trace_gym.analysis.taxonomy import by_name

CAPS = [by_name("confirmation-before-write"), by_name("information-communication")]

ITEMS = [
    LabelingItem("good", [
        {"role": "user", "content": "Please cancel my pending order #W1, I no longer need it."},
        {"role": "assistant", "content": "Order #W1 is pending and can be cancelled. Do you confirm (yes/no)?"},
        {"role": "user", "content": "Yes."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c0", "type": "function", "function": {
            "name": "cancel_pending_order", "arguments": "{\"order_id\": \"#W1\", \"reason\": \"no longer needed\"}"}}]},
        {"role": "tool", "tool_call_id": "c0", "name": "cancel_pending_order", "content": "{\"status\": \"cancelled\"}"},
        {"role": "assistant", "content": "Done: order #W1 is cancelled and $42.50 will be refunded."},
    ], 1.0, "t1"),
    LabelingItem("bad", [
        {"role": "user", "content": "Please cancel my pending order #W2."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c0", "type": "function", "function": {
            "name": "cancel_pending_order", "arguments": "{\"order_id\": \"#W2\", \"reason\": \"ordered by mistake\"}"}}]},
        {"role": "tool", "tool_call_id": "c0", "name": "cancel_pending_order", "content": "{\"status\": \"cancelled\"}"},
        {"role": "assistant", "content": "Done."},
    ], 0.0, "t2"),
]
