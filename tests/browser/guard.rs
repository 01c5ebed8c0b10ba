//! No click lands on a question the person did not read: a new question never moves the
//! card being read, and a card ignores clicks for a second after it appears or moves.

use serde_json::json;

use crate::live::{allow_once_from_the_page, browser_or_skip, card, id, settled, signed_in, WAIT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_question_never_moves_the_card_being_read_nor_takes_its_click() {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let (d, wd) = signed_in(&browser).await;

    let first = d
        .ask(json!({"kind": "permission", "agent": "claude", "prompt": "cargo test"}))
        .await;
    let allow_first = format!("{} button[data-choice='allow-once']", card(&first));
    let button = wd
        .wait_for(
            &format!("{} button[data-choice='allow-once']", settled(&first)),
            WAIT,
        )
        .await;
    // The person's pointer rests on the first card's "Allow once".
    wd.hover(&button).await;
    let centre = wd
        .script(&format!(
            "const r = document.querySelector(\"{allow_first}\").getBoundingClientRect(); \
             return [r.x + r.width / 2, r.y + r.height / 2]"
        ))
        .await;
    let under_pointer = format!(
        "const e = document.elementFromPoint({}, {}); \
         const b = e && e.closest('button'); const c = b && b.closest('li'); \
         return b ? c.dataset.id + ' ' + b.dataset.choice : null",
        centre[0], centre[1]
    );
    let want = format!("{} allow-once", id(&first));
    assert_eq!(wd.script(&under_pointer).await, want.as_str());

    // A new question arrives: it joins below, and the same button stays under the pointer.
    let second = d
        .ask(json!({"kind": "permission", "agent": "codex", "prompt": "rm -rf target"}))
        .await;
    wd.wait_for(&card(&second), WAIT).await;
    assert_eq!(
        wd.script(&under_pointer).await,
        want.as_str(),
        "the new card moved the one being read"
    );
    let below = wd
        .script(&format!(
            "return Boolean(document.querySelector(\"{}\").compareDocumentPosition(\
             document.querySelector(\"{}\")) & Node.DOCUMENT_POSITION_FOLLOWING)",
            card(&first),
            card(&second)
        ))
        .await;
    assert_eq!(below, true, "a new question joins at the end");

    // A click on the new card within its first second does not answer it.
    let allow_second = format!("{} button[data-choice='allow-once']", card(&second));
    let fresh = wd.find(&allow_second).await.unwrap();
    wd.click(&fresh).await;
    let msg = format!("{} .card-msg", card(&second));
    wd.wait_text(&msg, "just appeared or moved", WAIT).await;
    assert_eq!(d.get(id(&second)).await["status"], "pending");

    // A layout change above a card re-arms its guard: the first one leaves, the second moves
    // up into its place, and a click on it right then is ignored too.
    wd.wait_for(&settled(&second), WAIT).await;
    wd.script(&format!(
        "document.querySelector(\"{msg}\").textContent = ''"
    ))
    .await;
    assert_eq!(d.answer_as(&first, "deny", "cli").await.status, 200);
    wd.wait_gone(&card(&first), WAIT).await;
    let moved = wd.find(&allow_second).await.unwrap();
    wd.click(&moved).await;
    wd.wait_text(&msg, "just appeared or moved", WAIT).await;
    assert_eq!(d.get(id(&second)).await["status"], "pending");

    // Once it has stood still for a second, one click answers it.
    allow_once_from_the_page(&d, &wd, &second).await;
}
