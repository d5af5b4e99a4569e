"""The τ²-bench domains' tools by kind and the tables slots draw from (as the benchmark's tools.json records them).

Plain data, read by :class:`~trace_gym.capabilities.domains.Tau2Domain` and the spec loader.
"""

from __future__ import annotations

__all__ = ["TABLES", "WRITE_TOOLS", "READ_TOOLS", "GENERIC_TOOLS", "DOMAIN_GENERIC_TOOLS", "USER_WRITE_TOOLS",
           "USER_READ_TOOLS"]

TABLES = {"retail": ("users", "orders", "products"), "airline": ("users", "reservations", "flights"),
          # telecom: the agent's tables, plus the one-row ``phone`` material (whose phone, which issue)
          "telecom": ("customers", "lines", "plans", "bills", "devices", "phone")}

# Kinds of the domain tools (as recorded in the benchmark's tools.json).
WRITE_TOOLS = {
    "retail": {"cancel_pending_order", "exchange_delivered_order_items", "modify_pending_order_address", "modify_pending_order_items",
               "modify_pending_order_payment", "modify_user_address", "return_delivered_order_items"},
    "airline": {"book_reservation", "cancel_reservation", "send_certificate", "update_reservation_baggages",
                "update_reservation_flights", "update_reservation_passengers"},
    "telecom": {"suspend_line", "resume_line", "send_payment_request", "enable_roaming", "disable_roaming", "refuel_data"},
}
READ_TOOLS = {
    "retail": {"find_user_id_by_email", "find_user_id_by_name_zip", "get_order_details", "get_product_details", "get_item_details",
               "get_user_details", "list_all_product_types"},
    "airline": {"get_reservation_details", "get_user_details", "list_all_airports", "search_direct_flight", "search_onestop_flight",
                "get_flight_status"},
    "telecom": {"get_customer_by_phone", "get_customer_by_id", "get_customer_by_name", "get_details_by_id",
                "get_bills_for_customer", "get_data_usage"},
}

GENERIC_TOOLS = {"calculate", "transfer_to_human_agents"}
DOMAIN_GENERIC_TOOLS = {"telecom": {"transfer_to_human_agents"}}  # where the domain has not all of GENERIC_TOOLS

# Dual control: the tools the user runs on their own device (the benchmark's user_tools.json), by kind.
USER_WRITE_TOOLS = {
    "telecom": {"set_network_mode_preference", "toggle_airplane_mode", "reseat_sim_card", "toggle_data", "toggle_roaming",
                "toggle_data_saver_mode", "set_apn_settings", "reset_apn_settings", "toggle_wifi", "toggle_wifi_calling",
                "connect_vpn", "disconnect_vpn", "grant_app_permission", "reboot_device", "make_payment"},
}
USER_READ_TOOLS = {
    "telecom": {"check_status_bar", "check_network_status", "check_network_mode_preference", "run_speed_test", "check_sim_status",
                "check_data_restriction_status", "check_apn_settings", "check_wifi_status", "check_wifi_calling_status",
                "check_vpn_status", "check_installed_apps", "check_app_status", "check_app_permissions", "can_send_mms",
                "check_payment_request"},
}
