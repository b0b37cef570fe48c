"""The seeded world's fixed ids: how they are laid out, and the ones tests and demos rely on.

Ids are laid out in blocks of 1000 per organisation (index k = 0 for the demo organisation): users
k*1000+111.., repositories k*1000+201.., pull requests k*1000+301.., runs k*1000+401.., log sandboxes
k*1000+601... The tokens' users are 101 to 110 for the first ten tokens and 50001, 50002, ... for any more (so
they never meet the members' ids), and belong to every visible organisation. New runs get ids from 10001 and new
pull requests from 20001. The seed changes the content (texts, outcomes), never the ids.
"""

from __future__ import annotations

from typing import Final

BLOCK: Final = 1000
FIRST_TOKEN_USER_ID: Final = 101
FIRST_MEMBER_SUFFIX: Final = 111
FIRST_REPO_SUFFIX: Final = 201
FIRST_NEW_RUN_ID: Final = 10_001
FIRST_NEW_PR_ID: Final = 20_001
TOKEN_USERS_BELOW_MEMBERS: Final = FIRST_MEMBER_SUFFIX - FIRST_TOKEN_USER_ID
FIRST_FURTHER_TOKEN_USER_ID: Final = 50_001


def token_user_id(index: int) -> int:
    """The user of the sandbox's `index`-th token (0 is the demo user)."""
    if index < TOKEN_USERS_BELOW_MEMBERS:
        return FIRST_TOKEN_USER_ID + index
    return FIRST_FURTHER_TOKEN_USER_ID + index - TOKEN_USERS_BELOW_MEMBERS

# Facts of the demo organisation that tests and demos may rely on (the same for every seed).
DEMO_USER_ID: Final = FIRST_TOKEN_USER_ID  # the first token's user; further tokens are 102, 103, ...
WRITABLE_REPO_ID: Final = 201  # the tokens' users may write to 201, 202, 204 (archived) and 205
READ_ONLY_REPO_ID: Final = 203  # ... but not to 203
ARCHIVED_REPO_ID: Final = 204
RUN_WITH_PR_ID, PR_ID = 401, 301  # COMPLETE, open pull request on 201
URL_BANNED_RUN_ID, URL_BANNED_PR_ID = 402, 302
PARENT_RUN_BANNED_RUN_ID, PARENT_RUN_BANNED_PR_ID = 403, 303
ERROR_RUN_ID, READ_ONLY_PR_ID = 404, 305  # the pull request is on the read-only repository
RUN_WITHOUT_PR_ID: Final = 405
MERGED_RUN_ID, MERGED_PR_ID = 406, 304
DRAFT_RUN_ID, DRAFT_PR_ID = 407, 306
STOPPED_RUN_ID: Final = 408
LONG_RUN_ID: Final = 409  # `large_run_log_entries` entries
SANDBOX_WITH_LOGS, SANDBOX_WITHOUT_LOGS = 601, 602
# Runs that ended as the service also ends runs (`api.statuses`), before their pull-request step.
TIMEOUT_RUN_ID, MAX_ITERATIONS_RUN_ID, OUT_OF_TOKENS_RUN_ID = 410, 411, 412
PAUSED_RUN_ID: Final = 413  # waits for a resume
STUCK_RUN_ID: Final = 414  # ACTIVE, its last step long ago, and no end coming
