"""The user's phone in the τ² telecom domain: device tools, scenario set-up functions, assertions.

:class:`TelecomUserTools` works on the canonical user DB (``{"device", "surroundings"}``,
see :mod:`.telecom_db`).  Its tool methods have the same names and parameters as τ²'s,
so wrong or missing arguments raise the very ``TypeError`` texts the benchmark records;
their return strings follow the recorded corpus byte for byte.

The default VPN profile belongs to one toolkit instance, i.e. one episode (τ² keeps it
on the class, so a ``break_vpn`` in one environment slows every later one in the same
process; we do not share it).
"""

from __future__ import annotations

from typing import Any

from ..toolkit import Toolkit, tool
from .telecom_db import default_apn_settings
from .telecom_device import (
    MODE_TECH,
    NETWORK_MODES,
    NETWORK_STATUSES,
    SIGNAL_FACTOR,
    SIGNAL_ICONS,
    SIM_TEXTS,
    SPEED_ADVICE,
    TECH_SPEED,
    Device,
    drop_vpn,
    drop_wifi,
    granted_permissions,
    sim_status,
    validate_apn_settings,
    vpn_repr,
)

__all__ = ["TelecomUserTools", "validate_apn_settings"]


class TelecomUserTools(Toolkit):
    """Tools the simulated user runs on their phone, plus scenario and assertion functions.

    ``self.db`` is the episode's copy-on-write user DB.  Reads go through
    :attr:`device` / :attr:`surroundings` and never mutate; a method that changes the
    phone takes one private copy first (``self.db.own``) and hands it to the helpers.
    """

    def __init__(self, env: Any, db: Any):
        super().__init__(env, db)
        # The profile ``connect_vpn`` installs; ``break_vpn`` degrades it, for this episode only.
        self.default_vpn: dict[str, Any] = {
            "server_address": "192.168.1.1",
            "protocol": "OpenVPN",
            "server_performance": "excellent",
        }

    @property
    def device(self) -> Device:
        return self.db["device"]

    @property
    def surroundings(self) -> dict[str, Any]:
        return self.db["surroundings"]

    def _own_device(self) -> Device:
        return self.db.own("device")

    # ------------------------------------------------------------------ scenario set-up
    def set_user_info(self, name: str, phone_number: str) -> None:
        env = self.db.own("surroundings")
        env["name"] = name
        env["phone_number"] = phone_number

    def set_user_location(self, abroad: bool) -> None:
        self.db.own("surroundings")["is_abroad"] = abroad

    # ------------------------------------------------------------------ status bar
    @tool("read")
    def check_status_bar(self) -> str:
        return f"Status Bar: {self._status_bar()}"

    def _status_bar(self) -> str:
        dev = self.device
        parts: list[str] = []
        if dev["airplane_mode"]:
            parts.append("✈️ Airplane Mode")
        else:
            parts.append(SIGNAL_ICONS.get(dev["network_signal_strength"], "📵 No Signal"))
            tech = dev["network_technology_connected"]
            if tech != "none":
                parts.append(tech)
            if dev["data_enabled"] and tech != "none":
                parts.append("📱 Data Enabled")
                if dev["data_saver_mode"]:
                    parts.append("🔽 Data Saver")
            else:
                parts.append("📵 Data Disabled")
        if dev["wifi_enabled"] and dev["wifi_connected"]:
            parts.append(f"📡 Connected to {dev['wifi_ssid']}" if dev["wifi_ssid"] else "📡 Enabled")
        if dev["vpn_connected"]:
            parts.append("🔒 VPN Connected")
        parts.append(f"🔋 {dev['battery_level']}%")
        return " | ".join(parts)

    def _with_status_bar(self, text: str) -> str:
        return f"{text}\nStatus Bar: {self._status_bar()}"

    # ------------------------------------------------------------------ network
    @tool("read")
    def check_network_status(self) -> str:
        dev = self.device
        lines = [
            f"Airplane Mode: {'ON' if dev['airplane_mode'] else 'OFF'}",
            f"SIM Card Status: {self._sim_status()}",
            f"Cellular Connection: {dev['network_connection_status']}",
            f"Cellular Signal: {dev['network_signal_strength']}",
            f"Cellular Network Type: {dev['network_technology_connected']}",
            f"Mobile Data Enabled: {'Yes' if dev['data_enabled'] else 'No'}",
            f"Data Roaming Enabled: {'Yes' if dev['roaming_enabled'] else 'No'}",
            f"Wi-Fi Radio: {'ON' if dev['wifi_enabled'] else 'OFF'}",
            f"Wi-Fi Connected: {'Yes' if dev['wifi_connected'] else 'No'}",
        ]
        if dev["wifi_connected"]:
            lines.append(f"Connected Wi-Fi Network: {dev['wifi_ssid']}")
        return "\n".join(lines)

    @tool("read")
    def check_network_mode_preference(self) -> str:
        return f"Network Mode Preference: {self.device['network_mode_preference']}"

    @tool("write")
    def set_network_mode_preference(self, mode: str) -> str:
        if not isinstance(mode, str):
            # τ² stores such a value unchecked and then fails reading ``.value`` from it;
            # we fail with the same text before touching the phone.
            raise AttributeError(f"'{type(mode).__name__}' object has no attribute 'value'")
        if mode not in NETWORK_MODES:
            return self._with_status_bar(
                f"Failed to set network mode: '{mode}' is not a valid option. "
                f"Please use one of: {', '.join(NETWORK_MODES)}"
            )
        dev = self._own_device()
        dev["network_mode_preference"] = mode
        self._network_search(dev)
        return self._with_status_bar(f"Preferred Network Mode set to: {mode}")

    def _mobile_data_working(self) -> bool:
        dev, env = self.device, self.surroundings
        if dev["airplane_mode"] or dev["network_signal_strength"] == "none":
            return False
        if dev["network_connection_status"] == "no_service":
            return False
        if env["is_abroad"] and (not dev["roaming_enabled"] or not env["roaming_allowed"]):
            return False
        if not dev["data_enabled"]:
            return False
        return not env["mobile_data_usage_exceeded"]

    @tool("read")
    def run_speed_test(self) -> str:
        speed, label = self._speed_test()
        if speed is None:
            return f"Speed test failed: {label or 'Could not determine speed'}."
        return f"Speed Test Result: {speed:.2f} Mbps ({label}). {SPEED_ADVICE.get(label, '')}"

    def _speed_test(self) -> tuple[float | None, str]:
        if not self._mobile_data_working():
            return None, "No Connection"
        dev = self.device
        factor = 1.0
        vpn = dev["vpn_details"]
        if dev["vpn_connected"] and vpn and vpn["server_performance"] == "poor":
            factor = 0.1
        if dev["data_saver_mode"]:
            factor *= 0.2
        low, high = TECH_SPEED.get(dev["network_technology_connected"], (0.0, 0.0))
        signal = SIGNAL_FACTOR.get(dev["network_signal_strength"], 0.0)
        speed = round((low + high) / 2.0 * signal * factor, 2)
        if speed < 1:
            label = "Very Poor"
        elif speed < 5:
            label = "Poor"
        elif speed < 25:
            label = "Fair"
        elif speed < 100:
            label = "Good"
        else:
            label = "Excellent"
        return speed, label

    def simulate_network_search(self) -> None:
        """Re-derive the cellular connection (an env function, also used by task set-up)."""
        self._network_search(self._own_device())

    def _network_search(self, dev: Device) -> None:
        """Connection from SIM, mode preference, local signal, airplane mode, APN and line state."""
        env = self.surroundings
        connected = sim_status(dev) == "active"
        if connected:
            strengths = env["signal_strength"]
            pref = dev["network_mode_preference"]
            if pref == "4g_5g_preferred" and strengths.get("5G", "none") != "none":
                tech = "5G"
            else:
                tech = MODE_TECH.get(pref, "4G")
            dev["network_connection_status"] = "connected"
            dev["network_technology_connected"] = tech
            dev["network_signal_strength"] = strengths.get(tech, "none")
        if (
            not connected
            or dev["airplane_mode"]
            or dev["active_apn_settings"]["apn_name"] == "broken"
            or not env["line_active"]
        ):
            dev["network_connection_status"] = "no_service"
            dev["network_technology_connected"] = "none"
            dev["network_signal_strength"] = "none"

    # ------------------------------------------------------------------ airplane mode
    @tool("write")
    def toggle_airplane_mode(self) -> str:
        on = self._toggle_airplane_mode(self._own_device())
        return self._with_status_bar(f"Airplane Mode is now {'ON' if on else 'OFF'}.")

    def _toggle_airplane_mode(self, dev: Device) -> bool:
        was_on = dev["airplane_mode"]
        dev["airplane_mode"] = not was_on
        if was_on:
            dev["network_connection_status"] = "searching"
            if dev["wifi_enabled"]:
                drop_wifi(dev)
        else:
            drop_wifi(dev)
            drop_vpn(dev)
        self._network_search(dev)
        return dev["airplane_mode"]

    def turn_airplane_mode_on(self) -> str:
        dev = self._own_device()
        if not self._toggle_airplane_mode(dev):
            self._toggle_airplane_mode(dev)
        return "Airplane Mode is now ON."

    def turn_airplane_mode_off(self) -> str:
        dev = self._own_device()
        if self._toggle_airplane_mode(dev):
            self._toggle_airplane_mode(dev)
        return "Airplane Mode is now OFF."

    # ------------------------------------------------------------------ SIM
    def _sim_status(self) -> str:
        return sim_status(self.device)

    @tool("read")
    def check_sim_status(self) -> str:
        status = self._sim_status()
        return SIM_TEXTS.get(status, f"Unknown SIM status: {status}")

    @tool("write")
    def reseat_sim_card(self) -> str:
        dev = self._own_device()
        dev["sim_card_missing"] = False
        self._network_search(dev)
        return self._with_status_bar("SIM card re-seated successfully.")

    def unseat_sim_card(self) -> str:
        dev = self._own_device()
        dev["sim_card_missing"] = True
        self._network_search(dev)
        return "SIM card un-seated successfully."

    def lock_sim_card(self, mode: str) -> str:
        dev = self._own_device()
        if mode == "pin":
            dev["sim_card_status"] = "locked_pin"
        elif mode == "puk":
            dev["sim_card_status"] = "locked_puk"
        self._network_search(dev)
        return f"SIM card locked successfully in {mode} mode."

    # ------------------------------------------------------------------ mobile data and roaming
    def _flip(self, dev: Device, field: str, search: bool) -> bool:
        dev[field] = not dev[field]
        if search:
            self._network_search(dev)
        return dev[field]

    def _set_switch(self, field: str, on: bool, search: bool) -> None:
        """Flip ``field`` until it reads ``on`` (at most twice, as τ²'s turn_* helpers do)."""
        dev = self._own_device()
        if self._flip(dev, field, search) != on:
            self._flip(dev, field, search)

    @tool("write")
    def toggle_data(self) -> str:
        on = self._flip(self._own_device(), "data_enabled", search=True)
        return self._with_status_bar(f"Mobile Data is now {'ON' if on else 'OFF'}.")

    def turn_data_on(self) -> str:
        self._own_device()["data_enabled"] = True
        return "Data connection restored."

    def turn_data_off(self) -> str:
        self._set_switch("data_enabled", False, search=True)
        return "Data connection broken."

    @tool("write")
    def toggle_roaming(self) -> str:
        on = self._flip(self._own_device(), "roaming_enabled", search=True)
        return self._with_status_bar(f"Data Roaming is now {'ON' if on else 'OFF'}.")

    def turn_roaming_on(self) -> str:
        self._set_switch("roaming_enabled", True, search=True)
        return "Data Roaming is now ON."

    def turn_roaming_off(self) -> str:
        self._set_switch("roaming_enabled", False, search=True)
        return "Data Roaming is now OFF."

    @tool("read")
    def check_data_restriction_status(self) -> str:
        if self.device["data_saver_mode"]:
            return "Data Saver mode is ON (limits data usage)."
        return "Data Saver mode is OFF."

    @tool("write")
    def toggle_data_saver_mode(self) -> str:
        on = self._flip(self._own_device(), "data_saver_mode", search=False)
        return self._with_status_bar(f"Data Saver Mode is now {'ON' if on else 'OFF'}.")

    def turn_data_saver_mode_on(self) -> str:
        self._set_switch("data_saver_mode", True, search=False)
        return "Data Saver Mode is now ON."

    def turn_data_saver_mode_off(self) -> str:
        self._set_switch("data_saver_mode", False, search=False)
        return "Data Saver Mode is now OFF."

    # ------------------------------------------------------------------ APN
    @tool("read")
    def check_apn_settings(self) -> str:
        apn = self.device["active_apn_settings"]
        return (
            f"Current APN Name: {apn['apn_name'] or 'Not Set'}\n"
            f"MMSC URL (for picture messages): {apn['mmsc_url'] or 'Not Set'}\n"
            "(These are technical settings, usually best left unchanged.)"
        )

    @tool("write")
    def set_apn_settings(self, apn_settings: dict) -> str:
        if not isinstance(apn_settings, dict):
            # τ² would install the raw value and then fail on ``.apn_name``; fail first instead.
            raise AttributeError(f"'{type(apn_settings).__name__}' object has no attribute 'apn_name'")
        settings = validate_apn_settings(apn_settings)
        dev = self._own_device()
        dev["active_apn_settings"] = settings
        self._network_search(dev)
        return self._with_status_bar(f"APN settings set to: {settings['apn_name']}")

    @tool("write")
    def reset_apn_settings(self) -> str:
        dev = self._own_device()
        dev["active_apn_settings"]["reset_at_reboot"] = True
        self._network_search(dev)
        return self._with_status_bar("APN settings will reset at reboot.")

    def break_apn_settings(self) -> str:
        dev = self._own_device()
        dev["active_apn_settings"]["apn_name"] = "broken"
        self._network_search(dev)
        return "APN settings broken. Please call reset_apn_settings() to fix."

    def break_apn_mms_setting(self) -> str:
        self._own_device()["active_apn_settings"]["mmsc_url"] = None
        return "APN MMS setting broken. Please call reset_apn_settings() to fix."

    # ------------------------------------------------------------------ Wi-Fi and Wi-Fi calling
    @tool("read")
    def check_wifi_status(self) -> str:
        dev = self.device
        if not dev["wifi_enabled"]:
            return "Wi-Fi is turned OFF."
        if dev["wifi_connected"]:
            return f"Wi-Fi is ON and connected to '{dev['wifi_ssid']}'. Signal strength: {dev['wifi_signal_strength']}."
        return "Wi-Fi is ON but not connected to any network."

    @tool("write")
    def toggle_wifi(self) -> str:
        if self.device["airplane_mode"]:
            return self._with_status_bar("Cannot change Wi-Fi settings while Airplane Mode is ON.")
        dev = self._own_device()
        on = not dev["wifi_enabled"]
        dev["wifi_enabled"] = on
        if not on:
            drop_wifi(dev)
        return self._with_status_bar(f"Wi-Fi is now {'ON' if on else 'OFF'}.")

    @tool("read")
    def check_wifi_calling_status(self) -> str:
        return f"Wi-Fi Calling is currently turned {'ON' if self.device['wifi_calling_enabled'] else 'OFF'}."

    @tool("write")
    def toggle_wifi_calling(self) -> str:
        on = self._flip(self._own_device(), "wifi_calling_enabled", search=False)
        return self._with_status_bar(f"Wi-Fi Calling is now {'ON' if on else 'OFF'}.")

    def set_wifi_calling(self, enabled: bool, mms_over_wifi: bool | None = None) -> str:
        dev = self._own_device()
        if dev["wifi_calling_enabled"] != enabled:
            dev["wifi_calling_enabled"] = not dev["wifi_calling_enabled"]
        text = f"Wi-Fi Calling is now {'ON' if enabled else 'OFF'}."
        if mms_over_wifi is not None:
            dev["wifi_calling_mms_over_wifi"] = mms_over_wifi
            text += f"\nMMS over Wi-Fi is now {'ON' if mms_over_wifi else 'OFF'}."
        return text

    # ------------------------------------------------------------------ VPN
    @tool("read")
    def check_vpn_status(self) -> str:
        dev = self.device
        if dev["vpn_connected"]:
            details = dev["vpn_details"]
            if details:
                return f"VPN is ON and connected. Details: {vpn_repr(details)}"
            return "VPN is ON and connected (no specific details available)."
        if dev["vpn_enabled_setting"]:
            return "VPN is turned ON in settings, but currently not connected."
        return "VPN is turned OFF."

    @tool("write")
    def connect_vpn(self) -> str:
        if self.device["vpn_connected"]:
            return "VPN already connected."
        dev = self._own_device()
        dev["vpn_connected"] = True
        dev["vpn_details"] = dict(self.default_vpn)
        return self._with_status_bar("VPN connected successfully.")

    @tool("write")
    def disconnect_vpn(self) -> str:
        if not self.device["vpn_connected"]:
            return self._with_status_bar("No active VPN connection to disconnect.")
        drop_vpn(self._own_device())
        return self._with_status_bar("VPN disconnected successfully.")

    def break_vpn(self) -> str:
        """Connect (if needed) and degrade the VPN.

        In τ² the device then holds the very profile object that later connections
        reuse, so every reconnection in this episode is slow too: we degrade our
        per-episode profile as well.
        """
        self.connect_vpn()
        dev = self._own_device()
        if dev["vpn_details"] is None:
            raise AttributeError("'NoneType' object has no attribute 'server_performance'")
        dev["vpn_details"]["server_performance"] = "poor"
        self.default_vpn["server_performance"] = "poor"
        return "VPN connection broken."

    # ------------------------------------------------------------------ apps
    @tool("read")
    def check_installed_apps(self) -> str:
        return f"The following apps are installed on the phone: {', '.join(self.device['app_statuses'])}"

    @tool("read")
    def check_app_status(self, app_name: str) -> str:
        app = self.device["app_statuses"].get(app_name)
        if app is None:
            return f"App '{app_name}' not found on this phone."
        lines = [f"Status for App: {app_name}"]
        granted = granted_permissions(app)
        if granted:
            lines.append(" - Permissions Granted:")
            lines.extend(f"   - {p}" for p in granted)
        else:
            lines.append(" - Permissions: None granted.")
        return "\n".join(lines)

    @tool("read")
    def check_app_permissions(self, app_name: str) -> str:
        app = self.device["app_statuses"].get(app_name)
        if app is None:
            return f"App '{app_name}' not found on this phone."
        granted = granted_permissions(app)
        if not granted:
            return f"App '{app_name}' currently has no permissions granted."
        return f"App '{app_name}' has permission for: {', '.join(granted)}."

    @tool("write")
    def grant_app_permission(self, app_name: str, permission: str) -> str:
        app = self.device["app_statuses"].get(app_name)
        permission = permission.lower()
        if app is None:
            text = f"Error. App '{app_name}' not found. Cannot grant permission."
        elif permission not in app["permissions"]:
            text = (
                f"Error. Permission '{permission}' not tracked for app '{app_name}', "
                f"available permissions: {list(app['permissions'])}"
            )
        else:
            self._own_device()["app_statuses"][app_name]["permissions"][permission] = True
            text = f"Success. Permission '{permission}' granted to app '{app_name}'."
        return self._with_status_bar(text)

    def remove_app_permission(self, app_name: str, permission: str) -> tuple[bool, str]:
        app = self.device["app_statuses"].get(app_name)
        permission = permission.lower()
        if app is None:
            return False, f"App '{app_name}' not found. Cannot remove permission."
        if permission not in app["permissions"]:
            return False, f"Permission '{permission}' not tracked for app '{app_name}'."
        self._own_device()["app_statuses"][app_name]["permissions"][permission] = False
        return True, f"Permission '{permission}' removed from app '{app_name}'."

    # ------------------------------------------------------------------ MMS
    def _can_send_mms(self) -> bool:
        dev = self.device
        if not self._mobile_data_working():
            return False
        if dev["network_technology_connected"] == "2G":
            return False
        if dev["wifi_calling_enabled"] and dev["wifi_calling_mms_over_wifi"]:
            return False
        if dev["active_apn_settings"]["mmsc_url"] is None:
            return False
        app = dev["app_statuses"].get("messaging")
        if app is None:
            return False
        return bool(app["permissions"]["storage"] and app["permissions"]["sms"])

    @tool("read")
    def can_send_mms(self) -> str:
        if self._can_send_mms():
            return "Your messaging app can send MMS messages."
        return "Your messaging app cannot send MMS messages."

    # ------------------------------------------------------------------ device
    @tool("write")
    def reboot_device(self) -> str:
        dev = self._own_device()
        lines = []
        if dev["active_apn_settings"]["reset_at_reboot"]:
            lines.append("Resetting APN settings...")
            dev["active_apn_settings"] = default_apn_settings()
        lines.append("Restarting network services...")
        dev["network_connection_status"] = "searching"
        self._network_search(dev)
        return self._with_status_bar("\n".join(lines))

    # ------------------------------------------------------------------ payments
    @tool("read")
    def check_payment_request(self) -> str:
        req = self.surroundings["payment_request"]
        if req is None:
            return "No payment request has been made."
        return f"You have a payment request for bill {req['bill_id']} of {req['amount_due']} USD."

    @tool("write")
    def make_payment(self) -> str:
        if self.surroundings["payment_request"] is None:
            return "You do not have a payment request."
        req = self.db.own("surroundings")["payment_request"]
        req["paid"] = True
        return f"Payment of {req['amount_due']} USD has been made for bill {req['bill_id']}."

    # ------------------------------------------------------------------ assertions
    def assert_airplane_mode_status(self, expected_status: bool) -> bool:
        return self.device["airplane_mode"] == expected_status

    def assert_service_status(self, expected_status: str) -> bool:
        if expected_status not in NETWORK_STATUSES:
            raise ValueError(f"{expected_status!r} is not a valid NetworkStatus")
        return self.device["network_connection_status"] == expected_status

    def assert_mobile_data_status(self, expected_status: bool) -> bool:
        return self._mobile_data_working() == expected_status

    def assert_mobile_roaming_status(self, expected_status: bool) -> bool:
        return self.device["roaming_enabled"] == expected_status

    def assert_mobile_data_saver_mode_status(self, expected_status: bool) -> bool:
        return self.device["data_saver_mode"] == expected_status

    def assert_internet_speed(self, expected_speed: float, expected_desc: str | None = None) -> bool:
        speed, label = self._speed_test()
        speed = speed or 0.0
        if expected_desc is None:
            return speed >= expected_speed
        return speed >= expected_speed and label.lower() == expected_desc.lower()

    def assert_internet_not_excellent(self) -> bool:
        return self._speed_test()[1].lower() != "excellent"

    def assert_can_send_mms(self, expected_status: bool) -> bool:
        return self._can_send_mms() == expected_status

    def assert_mobile_data_usage_exceeded(self, expected_status: bool) -> bool:
        return self.surroundings["mobile_data_usage_exceeded"] == expected_status
