;;; garuda-test.el --- ERT tests of garuda.el against the real binary  -*- lexical-binding: t; -*-

;; Run: GARUDA_BIN=/path/to/garuda emacs --batch -L editors/emacs -l editors/emacs/test/garuda-test.el -f ert-run-tests-batch-and-exit
;; HOME and the XDG dirs are pointed at a temp dir, and the model is a replay cassette.

;;; Code:

(require 'ert)
(require 'garuda)

;; Read before the setup below points HOME elsewhere: where scripts/provision.sh put
;; typescript-language-server, and eglot for an Emacs that has none built in.
(defvar garuda-test-lsp-dir
  (or (getenv "GARUDA_LSP_TEST_DIR") (expand-file-name "~/.cache/garuda-test/lsp")))
(defvar garuda-test-eglot-dir
  (or (getenv "GARUDA_EGLOT_DIR") (expand-file-name "~/.cache/garuda-test/eglot")))

(defvar garuda-test-dir (file-truename (make-temp-file "garuda-el-" t)))
(defvar garuda-test-n 0 "Cassettes written.")

(defun garuda-test--line (content stop &rest more)
  "A cassette line: CONTENT (a list of blocks), STOP and MORE keys."
  (append (list :response (list :content (vconcat content) :stopReason stop
                                :usage (list :inputTokens (or (plist-get more :tokens) 50)
                                             :outputTokens 7)))
          (cl-loop for (k v) on more by #'cddr unless (eq k :tokens) append (list k v))))

(defun garuda-test--text (text &rest more)
  "A text answer TEXT."
  (apply #'garuda-test--line (list (list :type "text" :text text)) "end_turn" more))

(defun garuda-test--tool (id name input &rest more)
  "A tool call ID of NAME with INPUT."
  (apply #'garuda-test--line (list (list :type "tool_use" :id id :name name :input input))
         "tool_use" more))

(defun garuda-test--cassette (lines)
  "Write LINES as a cassette; return the model spec."
  (let ((path (expand-file-name (format "cassette-%d.jsonl" (cl-incf garuda-test-n)) garuda-test-dir)))
    (with-temp-file path
      (dolist (l lines) (insert (json-serialize l) "\n")))
    (concat "replay:" path)))

(defun garuda-test--setup ()
  "Isolate HOME/XDG dirs, point garuda.el at the binary."
  (let ((home (expand-file-name "home" garuda-test-dir)))
    (make-directory home t)
    (setq process-environment
          (append (list (concat "HOME=" home)
                        (concat "XDG_CONFIG_HOME=" home "/config")
                        (concat "XDG_STATE_HOME=" home "/state"))
                  process-environment))
    (setq garuda-program (or (getenv "GARUDA_BIN")
                             (expand-file-name "../../../target/debug/garuda"
                                               (file-name-directory (or load-file-name buffer-file-name))))
          garuda-policy "ask")))

(garuda-test--setup)

(defun garuda-test--project (name)
  "A project folder NAME with a .git marker and AGENTS.md."
  (let ((ws (expand-file-name name garuda-test-dir)))
    (make-directory (expand-file-name ".git" ws) t)
    (with-temp-file (expand-file-name "AGENTS.md" ws) (insert "# Test project\nBe brief.\n"))
    ws))

(defvar garuda-test-ws (garuda-test--project "ws"))
(defvar garuda-test-ws2 (garuda-test--project "ws2"))

(defvar garuda-test-auto "y" "Key pressed at every approval while waiting (nil: none).")
(defvar garuda-test-prompts nil "Texts of the approval buffers seen, newest first.")

(defun garuda-test--press (keys)
  "Press KEYS in the selected window, as typed."
  (execute-kbd-macro (kbd keys)))

(defun garuda-test--type (text)
  "Type TEXT in the selected window, a key per character (RET for a newline)."
  (execute-kbd-macro (string-replace "\n" "\r" text)))

(defun garuda-test--approve (keys)
  "Go to the waiting approval the way a person does (C-c C-a), then press KEYS."
  (garuda-approve)
  (should (eq (window-buffer) (get-buffer "*garuda approval*")))
  (set-buffer (window-buffer))
  (garuda-test--press keys))

(defun garuda-test--pump ()
  "Record the approval on screen and answer it with `garuda-test-auto'."
  (when garuda--approvals
    (let ((buf (get-buffer "*garuda approval*")))
      (when (and (buffer-live-p buf) (not (memq buf (mapcar #'car garuda-test-prompts))))
        (push (cons buf (with-current-buffer buf (buffer-string))) garuda-test-prompts))
      (when (and garuda-test-auto (buffer-live-p buf))
        (garuda-test--approve garuda-test-auto)))))

(defun garuda-test--wait (pred &optional secs)
  "Pump process output until PRED is true (SECS, default 60, is a safety net)."
  (let ((deadline (+ (float-time) (or secs 60))))
    (while (and (not (funcall pred)) (< (float-time) deadline))
      (garuda-test--pump)
      (accept-process-output nil 0.02))
    (should (funcall pred))))

(defun garuda-test--marked (mark)
  "Output of pgrep for MARK."
  (with-temp-buffer
    (call-process "pgrep" nil t nil "-f" mark)
    (string-trim (buffer-string))))

(defun garuda-test--fresh (lines &optional root)
  "A new chat in ROOT (default the test project) whose model plays LINES."
  (setq garuda-model (garuda-test--cassette lines))
  (with-current-buffer (garuda (or root garuda-test-ws))
    (when garuda--running
      (ignore-errors (garuda-cancel))
      (garuda-test--wait (lambda () (not garuda--running))))
    (garuda-new-chat)))

(defun garuda-test--done (buf)
  "A predicate: BUF's turn ended."
  (lambda () (not (buffer-local-value 'garuda--running buf))))

(defun garuda-test--text-of (buf)
  "BUF's text, invisible parts included."
  (with-current-buffer buf (buffer-substring-no-properties (point-min) (point-max))))

(defun garuda-test--code-buffer (name text)
  "A file buffer NAME in the test project with TEXT, shown alone in the selected window."
  (let ((path (expand-file-name name garuda-test-ws)))
    (with-temp-file path (insert text))
    (delete-other-windows)
    (switch-to-buffer (find-file-noselect path))
    (goto-char (point-max))
    (current-buffer)))

(defun garuda-test--count (regexp text)
  "How many times REGEXP matches in TEXT."
  (let ((n 0) (start 0))
    (while (string-match regexp text start) (cl-incf n) (setq start (match-end 0)))
    n))

(ert-deftest garuda-test-1-start-and-turn ()
  "An approval takes no focus and no keys; C-c C-a goes to it; RET does not approve, y does."
  (let* ((garuda-test-auto nil)
         (chat (garuda-test--fresh
                (list (garuda-test--tool "toolu_1" "bash" '(:command "echo garuda-ok"))
                      (garuda-test--line (list '(:type "thinking" :thinking "The user wants it.")
                                               '(:type "text" :text "The command printed garuda-ok."))
                                         "end_turn" :chunks ["The command" " printed" " garuda-ok."]))))
         (code (garuda-test--code-buffer "typing.txt" ""))
         (win (selected-window)))
    (should-not (buffer-local-value 'garuda--session-id chat))
    (with-current-buffer chat (garuda-send "please run echo"))
    (garuda-test--wait (lambda () garuda--approvals))
    (garuda-test--pump)
    (should (string-match-p "bash: echo garuda-ok" (cdar garuda-test-prompts)))
    ;; Shown where it is seen, but the keyboard stays in the code buffer.
    (should (get-buffer-window "*garuda approval*"))
    (should (eq (selected-window) win))
    (should (eq (window-buffer) code))
    (should garuda-approval-waiting-mode)
    (should (string-match-p "C-c C-a" (format "%S" (assq 'garuda-approval-waiting-mode minor-mode-alist))))
    (should (string-match-p "⚠ approval waiting: bash: echo garuda-ok · C-c C-a" (garuda-test--text-of chat)))
    ;; Words full of y, a and n typed in the code buffer answer nothing and all land there.
    (garuda-test--type "# my array may stay\nyes and no, y a n q\n")
    (accept-process-output nil 0.2)
    (should (equal (with-current-buffer code (buffer-string)) "# my array may stay\nyes and no, y a n q\n"))
    (should garuda--approvals)
    (should-not (string-match-p "approval: \\(allowed\\|rejected\\)" (garuda-test--text-of chat)))
    ;; At the approval: RET does nothing, y allows once; then back to the code buffer.
    (garuda-approve)
    (should (eq (window-buffer) (get-buffer "*garuda approval*")))
    (set-buffer (window-buffer))
    (garuda-test--press "RET")
    (accept-process-output nil 0.2)
    (should garuda--approvals)
    (garuda-test--press "y")
    (should (eq (selected-window) win))
    (should-not garuda-approval-waiting-mode)
    (garuda-test--wait (garuda-test--done chat))
    (with-current-buffer chat
      (should (equal (plist-get garuda--last-result :stopReason) "end_turn"))
      (should garuda--session-id)
      (let ((text (garuda-test--text-of chat)))
        ;; The answer took the place of the "waiting" line: nothing stale stays.
        (should (string-match-p "> please run echo\n+▸ bash: echo garuda-ok\n  approval: allowed once\n  ✓ done · exit 0" text))
        (should-not (string-match-p "approval waiting" text))
        (should (string-match-p "The command printed garuda-ok\\.\n\n> \\'" text))
        (should-not (string-match-p "end_turn" text))
        (should (string-match-p "💭 thinking" text)))
      ;; The tool output is there but hidden until TAB.
      (save-excursion
        (goto-char (point-min))
        (search-forward "    garuda-ok")
        (should (invisible-p (point))))
      ;; The header line is a mode line construct: its % is doubled to show as one.
      (should (string-match-p "replay:" (garuda--header-line)))
      (should (string-match-p "/128\\.0k ([0-9]+%%)" (garuda--header-line)))
      (message "TIMING emacs: command to first streamed character %.1f ms"
               (* 1000 (- garuda--first-delta garuda--turn-start))))
    (kill-buffer code)))

(ert-deftest garuda-test-1c-explore-shows-its-agent ()
  "An explore call's agent: its read_file under the call, its step in the header, its text never ours."
  (with-temp-file (expand-file-name "a.txt" garuda-test-ws) (insert "alpha\n"))
  ;; Requests in order: main (calls explore), the explore agent twice, main again.
  (let* ((chat (garuda-test--fresh
                (list (garuda-test--tool "toolu_x" "explore" '(:task "look at a.txt"))
                      (garuda-test--tool "toolu_r" "read_file" '(:path "a.txt"))
                      (garuda-test--text "AGENT-FINDING a.txt holds alpha")
                      (garuda-test--text "Main answer done."))))
         (headers nil)
         (seen nil)
         (garuda-agent-event-functions
          (list (lambda (_sid agent event)
                  (push (cons agent event) seen)
                  (push (with-current-buffer chat (garuda--header-line)) headers)))))
    (with-current-buffer chat (garuda-send "explore a.txt"))
    (garuda-test--wait (garuda-test--done chat))
    (let ((text (garuda-test--text-of chat)))
      (should (string-match-p "▸ explore [^\n]*\n  ↳ explore: read_file: a\\.txt\n  ✓ done" text))
      (should (string-match-p "Main answer done\\." text))
      ;; The agent's answer is only in the call's hidden output (indented), never a line of ours.
      (should-not (string-match-p "^AGENT-FINDING" text))
      (should (string-match-p "^    AGENT-FINDING" text)))
    ;; The agent's steps are folded under the explore call's line; TAB there shows them.
    (with-current-buffer chat
      (goto-char (point-min))
      (let ((step (search-forward "  ↳ explore: read_file" nil t)))
        (should step)
        (should (eq (get-text-property step 'invisible) 'garuda))
        (goto-char (point-min))
        (search-forward "▸ explore")
        (garuda-toggle-section)
        (should-not (get-text-property step 'invisible))))
    (should (cl-some (lambda (s) (equal (plist-get (car s) :toolCallId) "toolu_x")) seen))
    (should (cl-some (lambda (h) (string-match-p "⚙ explore ↳ explore: read_file: a\\.txt" h)) headers))
    (should (cl-some (lambda (h) (string-match-p "↳ explore: AGENT-FINDING a\\.txt holds alpha" h)) headers))
    (should-not (string-match-p "↳" (with-current-buffer chat (garuda--header-line))))))

(ert-deftest garuda-test-1b-next-question-at-the-prompt ()
  "After a turn point is at the prompt: the next question is typed and sent without M->."
  (let ((chat (garuda-test--fresh (list (garuda-test--text "One.") (garuda-test--text "Two.")))))
    (delete-other-windows)
    (switch-to-buffer chat)
    (goto-char (point-max))
    (garuda-test--press "first SPC question RET")
    (garuda-test--wait (garuda-test--done chat))
    (should (= (point) (point-max)))
    (garuda-test--press "second SPC question RET")
    (garuda-test--wait (garuda-test--done chat))
    (let ((text (garuda-test--text-of chat)))
      (should (string-match-p "> first question\n\nOne\\.\n\n> second question\n\nTwo\\.\n\n> \\'" text)))
    ;; Typed in the output, a letter goes to the input instead of "Text is read-only".
    (goto-char (point-min))
    (garuda-test--press "x")
    (should (equal (garuda--input-text) "x"))
    (garuda-test--press "DEL")))

(ert-deftest garuda-test-2-cancel ()
  "Cancel a slow bash call: stopReason cancelled, and the queued prompt is said to be dropped."
  (let ((chat (garuda-test--fresh
               (list (garuda-test--tool "toolu_2" "bash" '(:command "sleep 30; echo garuda-el-cancel"))
                     (garuda-test--text "no")))))
    (with-current-buffer chat
      (garuda-send "slow please")
      (garuda-test--wait (lambda () (not (string-empty-p (garuda-test--marked "garuda-el-cancel")))))
      (garuda-send "and then this")
      (should (string-match-p "⏳ queued: and then this" (buffer-string)))
      (should (eq t (plist-get (garuda-cancel) :ok)))
      (garuda-test--wait (garuda-test--done chat))
      (should (equal (plist-get garuda--last-result :stopReason) "cancelled"))
      (let ((text (buffer-string)))
        (should (string-match-p "\\[cancelled\\]" text))
        ;; Said after the turn, so the tool's result stays under its tool.
        (should (string-match-p "✗ interrupted[^\n]*\n\\(    [^\n]*\n\\)*\\[cancelled\\]\n⏳ cancel: the queued prompt was dropped, not sent: and then this" text))
        (should-not (string-match-p "⏳ queued" text)))
      (garuda-test--wait (lambda () (string-empty-p (garuda-test--marked "garuda-el-cancel")))))))

(ert-deftest garuda-test-0-format-chars-show-escaped ()
  "Bidi overrides and zero-width characters in what is built from a call's raw input
show escaped in the approval buffer and the call line."
  (should (equal (garuda--escape-format-chars "a\u202eb\u200bc\u2028d\u2066e\ufeff")
                 "a\\u{202e}b\\u{200b}c\\u{2028}d\\u{2066}e\\u{feff}"))
  (should (equal (garuda--escape-format-chars "plain é ⏎") "plain é ⏎"))
  (let ((cmd "echo \u202e; hs.lave | lruc ; ls"))
    (should (equal (garuda--describe-call "bash" (list :command cmd))
                   "bash: echo \\u{202e}; hs.lave | lruc ; ls"))
    (let* ((params (list :toolName "bash" :title (concat "bash: " cmd)
                         :input (list :command cmd)
                         :options (vector (list :optionId "reject" :name "Reject"))))
           (buf (garuda--show-approval (list :params params))))
      (unwind-protect
          (let ((text (with-current-buffer buf (buffer-string))))
            (should (string-match-p (regexp-quote "Garuda wants to run bash: echo \\u{202e}; hs.lave") text))
            (should (string-match-p (regexp-quote "$ echo \\u{202e}; hs.lave") text))
            (should-not (string-match-p garuda--format-chars-re text)))
        (garuda--close-approval (list :buffer buf))))))

(ert-deftest garuda-test-3-edit-through-the-buffer ()
  "An approved edit shows a diff, updates the open buffer without a reload, and undoes."
  (let* ((path (expand-file-name "notes.txt" garuda-test-ws))
         (garuda-test-auto nil))
    (with-temp-file path (insert "alpha\nbeta\ndelta\n"))
    (let ((file-buf (find-file-noselect path))
          (chat (garuda-test--fresh
                 (list (garuda-test--tool "r1" "read_file" '(:path "notes.txt"))
                       (garuda-test--tool "e1" "edit_file" '(:path "notes.txt" :old_string "beta" :new_string "gamma"))
                       (garuda-test--text "Edited.")))))
      (with-current-buffer file-buf (goto-char (point-min)) (forward-char 2))
      (with-current-buffer chat (garuda-send "change beta"))
      (garuda-test--wait (lambda () garuda--approvals))
      (garuda-test--pump)
      (should (string-match-p "^-beta$" (cdar garuda-test-prompts)))
      (should (string-match-p "^\\+gamma$" (cdar garuda-test-prompts)))
      (should-not (string-match-p "unsaved" (cdar garuda-test-prompts)))
      (garuda-test--approve "RET")
      (should garuda--approvals)
      (garuda-test--press "y")
      (garuda-test--wait (garuda-test--done chat))
      (with-current-buffer file-buf
        (should (equal (buffer-string) "alpha\ngamma\ndelta\n"))
        (should-not (buffer-modified-p))
        (should (= (point) 3))
        (should (equal (with-temp-buffer (insert-file-contents path) (buffer-string))
                       "alpha\ngamma\ndelta\n"))
        (undo)
        (should (equal (buffer-string) "alpha\nbeta\ndelta\n"))
        (save-buffer))
      (kill-buffer file-buf))))

(ert-deftest garuda-test-3b-edit-of-an-unsaved-buffer ()
  "The approval says up front that the buffer has unsaved changes and diffs its text;
allowed as it is, the edit is refused and the chat says why; s saves first."
  (let* ((path (expand-file-name "draft.txt" garuda-test-ws))
         (garuda-test-auto nil))
    (with-temp-file path (insert "one\ntwo\n"))
    (let ((file-buf (find-file-noselect path))
          (chat (garuda-test--fresh
                 (list (garuda-test--tool "r1" "read_file" '(:path "draft.txt"))
                       (garuda-test--tool "e1" "edit_file" '(:path "draft.txt" :old_string "two" :new_string "TWO"))
                       (garuda-test--text "Refused, I see.")
                       (garuda-test--tool "r2" "read_file" '(:path "draft.txt"))
                       (garuda-test--tool "e2" "edit_file" '(:path "draft.txt" :old_string "two" :new_string "TWO"))
                       (garuda-test--tool "r3" "read_file" '(:path "draft.txt"))
                       (garuda-test--tool "e3" "edit_file" '(:path "draft.txt" :old_string "two" :new_string "TWO"))
                       (garuda-test--text "Done now.")))))
      (with-current-buffer file-buf (goto-char (point-max)) (insert "three (unsaved)\n"))
      (with-current-buffer chat (garuda-send "capitalize two"))
      (garuda-test--wait (lambda () garuda--approvals))
      (garuda-test--pump)
      (let ((shown (cdar garuda-test-prompts)))
        (should (string-match-p "⚠ draft.txt has unsaved changes in Emacs" shown))
        (should (string-match-p "s saves the buffer first" shown))
        ;; A diff of the buffer's text, unsaved line included as context.
        (should (string-match-p "^-two$" shown))
        (should (string-match-p "^\\+TWO$" shown))
        (should (string-match-p "^ three (unsaved)$" shown)))
      (garuda-test--approve "y")
      (garuda-test--wait (garuda-test--done chat))
      (should (string-match-p "✗ failed: [^\n]*draft.txt has unsaved changes in Emacs; save or revert it first"
                              (garuda-test--text-of chat)))
      (should (equal (with-current-buffer file-buf (buffer-string)) "one\ntwo\nthree (unsaved)\n"))
      ;; Again, saving first from the approval, asked from the file's window with the chat
      ;; beside it: s saves and allows at once, in one step, and the layout stays.
      (setq garuda-test-prompts nil)
      (delete-other-windows)
      (switch-to-buffer file-buf)
      (let ((code-win (selected-window))
            (layout (lambda (code-win)
                      (should (eq (selected-window) code-win))
                      (should (eq (window-buffer code-win) file-buf))
                      (should (= 1 (length (get-buffer-window-list chat nil t))))
                      (should-not (get-buffer-window "*scratch*" t)))))
        (set-window-buffer (split-window-right) chat)
        (with-current-buffer chat (garuda-send "try again"))
        (garuda-test--wait (lambda () garuda--approvals))
        (should (= 1 (length (get-buffer-window-list "*garuda approval*" nil t))))
        (garuda-test--approve "s")
        (should-not (buffer-modified-p file-buf))
        (should-not garuda--approvals)
        (should-not (get-buffer-window "*garuda approval*" t))
        (funcall layout code-win)
        (should (string-match-p "approval: saved draft.txt, then allowed once" (garuda-test--text-of chat)))
        ;; Saved, the file changed since the model read it: it is told so, reads it again, asks again.
        (garuda-test--wait (lambda () (string-match-p "file changed on disk since you read it" (garuda-test--text-of chat))))
        (garuda-test--wait (lambda () garuda--approvals))
        (should (= 1 (length (get-buffer-window-list "*garuda approval*" nil t))))
        (garuda-test--approve "y")
        (funcall layout code-win)
        (garuda-test--wait (garuda-test--done chat))
        (funcall layout code-win))
      (should (equal (with-current-buffer file-buf (buffer-string)) "one\nTWO\nthree (unsaved)\n"))
      (kill-buffer file-buf))))

(ert-deftest garuda-test-4-switch-project-and-send-from-a-file ()
  "`garuda-send' from a file buffer asks that file's project; each project has its session."
  (let* ((chat1 (garuda-test--fresh (list (garuda-test--text "In project one."))))
         (file2 (expand-file-name "main.txt" garuda-test-ws2)))
    (with-current-buffer chat1 (garuda-send "here"))
    (garuda-test--wait (garuda-test--done chat1))
    (let ((s1 (buffer-local-value 'garuda--session-id chat1)))
      (should s1)
      (with-temp-file file2 (insert "hello\n"))
      (setq garuda-model (garuda-test--cassette (list (garuda-test--text "In project two."))))
      (with-current-buffer (find-file-noselect file2)
        (let ((chat2 (garuda-send "where am I")))
          (should-not (eq chat2 chat1))
          (garuda-test--wait (garuda-test--done chat2))
          (with-current-buffer chat2
            (should (equal garuda--root garuda-test-ws2))
            (should-not (equal garuda--session-id s1))
            (should (string-match-p "In project two\\." (buffer-string)))))
        (kill-buffer))
      (should (equal (buffer-local-value 'garuda--session-id chat1) s1))
      (should-not (string-match-p "In project two" (garuda-test--text-of chat1))))))

(ert-deftest garuda-test-5-region-reaches-the-model ()
  "`garuda-send-region' sends the lines; the cassette line matches only them."
  (let ((path (expand-file-name "code.el" garuda-test-ws))
        (chat (garuda-test--fresh (list (garuda-test--text "It sets the mark." :match "SELECTED_MARK 1")))))
    (with-temp-file path (insert "(setq SELECTED_MARK 1)\n(message \"x\")\n(ignore)\n"))
    (with-current-buffer (find-file-noselect path)
      (garuda-send-region (point-min) (progn (goto-char (point-min)) (forward-line 2) (point)) "explain")
      (garuda-test--wait (garuda-test--done chat))
      (should (string-match-p "It sets the mark\\." (garuda-test--text-of chat)))
      (should (string-match-p "code.el lines 1-2" (garuda-test--text-of chat)))
      (kill-buffer))))

(ert-deftest garuda-test-6-input-during-a-turn-is-queued ()
  "During a turn the prompt stays; text sent is shown as queued above it, then sent."
  (let ((chat (garuda-test--fresh (list (garuda-test--tool "s1" "bash" '(:command "sleep 1"))
                                        (garuda-test--text "First done.")
                                        (garuda-test--text "Second done.")))))
    (with-current-buffer chat
      (goto-char (point-max)) (insert "first") (garuda-send-input)
      (garuda-test--wait (lambda () (string-match-p "approval: allowed once" (buffer-string))))
      (should garuda--running)
      (should (string-match-p "approval: allowed once\n\n> \\'" (buffer-string)))
      (goto-char (point-max)) (insert "second question") (garuda-send-input)
      (should (string-match-p "\n⏳ queued: second question (sent when the running turn ends)\n> \\'" (buffer-string)))
      (should (string-match-p "1 queued" (garuda--header-line)))
      ;; More typing during the turn stays in the input, apart from the output.
      (insert "draft")
      (garuda-test--wait (lambda () (string-match-p "First done\\." (buffer-string))))
      (garuda-test--wait (lambda () (string-match-p "Second done\\." (buffer-string))))
      (garuda-test--wait (garuda-test--done chat))
      (let ((text (buffer-string)))
        (should (string-match-p "First done\\.\n\n> second question\n\nSecond done\\.\n\n> draft\\'" text))
        (should-not (string-match-p "⏳ queued" text)))
      (should (equal (garuda--input-text) "draft"))
      (let ((inhibit-read-only t)) (delete-region garuda--input-marker (point-max))))))

(ert-deftest garuda-test-6a-chat-window-follows-output ()
  "The chat window follows the output while another window is selected, when its point is at the end."
  (let ((chat (garuda-test--fresh (list (garuda-test--text "Streamed while you type elsewhere."))))
        (code (garuda-test--code-buffer "elsewhere.txt" "")))
    (let ((chat-win (split-window-below)))
      (set-window-buffer chat-win chat)
      (set-window-point chat-win (with-current-buffer chat (point-max)))
      (should (eq (window-buffer) code))
      (with-current-buffer code (garuda-send "stream"))
      (garuda-test--wait (garuda-test--done chat))
      (should (eq (window-buffer) code))
      (should (= (window-point chat-win) (with-current-buffer chat (point-max))))
      (should (string-match-p "Streamed while you type elsewhere\\."
                              (with-current-buffer chat
                                (buffer-substring-no-properties (point-min) (window-point chat-win)))))
      (delete-window chat-win))
    (kill-buffer code)))

(ert-deftest garuda-test-6b-switch-model-and-policy ()
  "`garuda-set-model' and `garuda-set-policy' switch the running session."
  (let ((chat (garuda-test--fresh (list (garuda-test--text "First.")))))
    (with-current-buffer chat
      (goto-char (point-max)) (insert "hello") (garuda-send-input)
      (garuda-test--wait (garuda-test--done chat))
      (let ((second (garuda-test--cassette
                     (list (garuda-test--text "Second." :match "The model was switched")
                           (garuda-test--tool "p1" "bash" '(:command "echo unasked"))
                           (garuda-test--text "Ran.")))))
        (should (equal (plist-get (garuda-set-model second) :model) second))
        (should (equal (plist-get (garuda-set-policy "full-auto") :policy) "full-auto"))
        (should (string-match-p "⚙ model .* · approvals full-auto" (garuda-test--text-of chat)))
        (goto-char (point-max)) (insert "again") (garuda-send-input)
        (garuda-test--wait (garuda-test--done chat))
        (should (string-match-p "Second\\." (garuda-test--text-of chat)))
        (let ((seen (length garuda-test-prompts)))
          (goto-char (point-max)) (insert "run it") (garuda-send-input)
          (garuda-test--wait (garuda-test--done chat))
          (should (string-match-p "Ran\\." (garuda-test--text-of chat)))
          (should (= seen (length garuda-test-prompts))))))))

(defun garuda-test--big-turns (prompts)
  "Cassette lines: for each of PROMPTS a read of big.txt and an answer (the first also
writes made.txt), then a summary with a heading of its own, as models write them."
  (with-temp-file (expand-file-name "big.txt" garuda-test-ws)
    (dotimes (i 800) (insert (format "filler line %d of the big file\n" i))))
  (let ((made (expand-file-name "made.txt" garuda-test-ws)))
    (when (file-exists-p made) (delete-file made)))
  (let ((lines nil) (i 0))
    (dolist (_ prompts)
      (when (= i 0)
        (push (garuda-test--tool "w0" "write_file" '(:path "made.txt" :content "made\n")) lines))
      (push (garuda-test--tool (format "r%d" i) "read_file" '(:path "big.txt") :tokens 20000) lines)
      (push (garuda-test--text (format "answer %d" i) :tokens 20000) lines)
      (cl-incf i))
    (push (garuda-test--text "### Summary\n\nSUMMARY-OF-THE-SESSION") lines)
    (nreverse lines)))

(defun garuda-test--pick-first (&optional check)
  "Stand-in for `completing-read' in the picker: CHECK the table, answer the default,
which the prompt names (RET takes it)."
  (lambda (prompt table _pred _req _init _hist def &rest _)
    (when check (funcall check table))
    (should (string-match-p (format "(default %s)" (regexp-quote def)) prompt))
    def))

(ert-deftest garuda-test-7-compaction-and-resume ()
  "Compaction is one line above the prompt; the summary reads as sections; a resumed
session shows it as a summary and each step once; the picker lists titles, newest first."
  (let* ((prompts (cl-loop for i below 6 collect (format "question %d" i)))
         (chat (garuda-test--fresh (garuda-test--big-turns prompts))))
    (with-current-buffer chat
      (dolist (p prompts)
        (garuda-send p)
        (garuda-test--wait (garuda-test--done chat)))
      (let ((sid garuda--session-id))
        (should (eq t (plist-get (garuda-compact "the answers") :compacted)))
        (let ((text (buffer-string)))
          (should (= 1 (cl-count ?⟲ text)))
          (should (string-match-p "⟲ context compacted (manual, summary): 20\\.0k → [^\n]*\n\n> \\'" text)))
        (should-not garuda--activity)
        (let ((summary (garuda-summary)))
          (should (eq (window-buffer) summary))
          (with-current-buffer summary
            (let ((text (buffer-string)))
              (should (string-match-p "SUMMARY-OF-THE-SESSION" text))
              (should (string-match-p "^First request:\nquestion 0$" text))
              (should (string-match-p "^• question 1$" text))
              (should-not (string-match-p "</?\\(first_user_request\\|user_messages\\|message\\|summary\\|files_edited\\)>" text))
              ;; The edited files as a list, and one heading for the summary, not two.
              (should (string-match-p "^Files edited:\n- made\\.txt$" text))
              (should (string-match-p "^Summary:\nSUMMARY-OF-THE-SESSION" text))
              (should-not (string-match-p "### Summary" text))
              (should-not (string-match-p "This session continues" text))))
          (quit-window t))
        (cl-letf (((symbol-function 'completing-read)
                   (garuda-test--pick-first
                    (lambda (table)
                      (let ((all (all-completions "" table))
                            (meta (funcall table "" nil 'metadata)))
                        (should (eq (alist-get 'display-sort-function (cdr meta)) 'identity))
                        (should (equal (car all) "question 0"))
                        (should (string-match-p "· [0-9]+ messages"
                                                (funcall (alist-get 'annotation-function (cdr meta)) (car all)))))))))
          (should (equal (garuda-sessions) sid))))
      (let ((text (garuda-test--text-of chat)))
        (should (string-match-p "⟲ earlier conversation compacted; the model continues from this summary" text))
        (should (string-match-p "SUMMARY-OF-THE-SESSION" text))
        (should-not (string-match-p "<first_user_request>\\|</user_messages>\\|<files_edited>" text))
        (should-not (string-match-p "### Summary" text))
        (should-not (string-match-p "> This session continues" text))
        (should (= 1 (garuda-test--count "^> question 5$" text)))
        (should (= 1 (garuda-test--count "^> question 0$" text)))
        (should (= 1 (garuda-test--count "^answer 5$" text)))))))

(ert-deftest garuda-test-7b-repeated-message-across-compaction-and-restart ()
  "A user message repeated word for word before and after a compaction, resumed after a
restart of the server, is shown every time; only the server's kept copies (copyOf) are not."
  (let* ((prompts (make-list 6 "continue"))
         (lines (append (garuda-test--big-turns prompts)
                        (list (garuda-test--text "answer after" :match "continue"))))
         (chat (garuda-test--fresh lines)))
    (with-current-buffer chat
      (dolist (p prompts)
        (garuda-send p)
        (garuda-test--wait (garuda-test--done chat)))
      (should (eq t (plist-get (garuda-compact) :compacted)))
      (garuda-send "continue")
      (garuda-test--wait (garuda-test--done chat))
      (let ((sid garuda--session-id))
        (garuda-shutdown)
        (cl-letf (((symbol-function 'completing-read) (garuda-test--pick-first)))
          (should (equal (garuda-sessions) sid)))))
    (let* ((text (garuda-test--text-of chat))
           (messages (garuda--all-messages (buffer-local-value 'garuda--session-id chat))))
      (should (cl-some (lambda (m) (plist-get m :copyOf)) messages))
      (should (= 7 (garuda-test--count "^> continue$" text)))
      (should (= 1 (garuda-test--count "^answer 5$" text)))
      (should (= 1 (garuda-test--count "^answer after$" text))))))

(ert-deftest garuda-test-7c-cache-share-in-the-header ()
  "The header shows the session's cache share beside the context use, once read."
  (let* ((cached (lambda (text read write)
                   (list :response (list :content (vector (list :type "text" :text text))
                                         :stopReason "end_turn"
                                         :usage (list :inputTokens 10 :outputTokens 5
                                                      :cacheReadInputTokens read
                                                      :cacheCreationInputTokens write)))))
         (chat (garuda-test--fresh (list (funcall cached "ANSWER-ONE" 0 1000)
                                         (funcall cached "ANSWER-TWO" 1000 100)))))
    (with-current-buffer chat
      (garuda-send "first")
      (garuda-test--wait (lambda () (string-match-p "ANSWER-ONE" (buffer-string))))
      (garuda-test--wait (garuda-test--done chat))
      (should-not (string-match-p "cache" (garuda--header-line)))
      (should (equal (plist-get garuda--cache-miss :cause) "firstRequest"))
      (garuda-send "second")
      (garuda-test--wait (lambda () (string-match-p "ANSWER-TWO" (buffer-string))))
      (garuda-test--wait (garuda-test--done chat))
      ;; 1000 read of 2120 sent over the session; % doubled in a mode line construct.
      (should (string-match-p "cache 47%%" (garuda--header-line)))
      (should-not garuda--cache-miss))))

(ert-deftest garuda-test-8-sessions-newest-first ()
  "The picker lists newest first by title (made unique), leaves out headless runs,
agents' sub-sessions and sessions never written in."
  (let ((sorted (garuda--sorted-sessions
                 (vector '(:sessionId "a" :created 1000 :title "old" :messageCount 2)
                         '(:sessionId "b" :created 3000 :title "new" :messageCount 4)
                         '(:sessionId "c" :created 5000 :title "exec" :origin "exec")
                         '(:sessionId "g" :created 6000 :title "sub" :parentSessionId "d")
                         '(:sessionId "e" :created 2500 :title "new" :messageCount 1)
                         '(:sessionId "f" :created 2400 :title nil)
                         '(:sessionId "d" :created 2000 :updated 9000 :title "active")))))
    ;; "f" was never written in: nothing to resume.
    (should (equal (mapcar (lambda (s) (plist-get s :sessionId)) sorted) '("d" "b" "e" "a")))
    (should (equal (mapcar #'car (garuda--session-choices sorted))
                   '("active" "new" "new <2>" "old")))))

(defun garuda-test--session-count (ws)
  "Sessions of workspace root WS on the server."
  (length (plist-get (garuda--call "session/list" (list :workspaceId (garuda--workspace ws))) :sessions)))

(ert-deftest garuda-test-8b-continue-where-you-left-off ()
  "After a restart the chat shows the project's latest session and the first prompt
continues it; opening creates no session; `garuda-continue-latest' nil starts fresh."
  (let ((chat (garuda-test--fresh (list (garuda-test--text "Noted." :match "remember-me")
                                        (garuda-test--text "Continued." :match "second")
                                        (garuda-test--text "Fresh." :match "third")))))
    (with-current-buffer chat (garuda-send "remember-me"))
    (garuda-test--wait (garuda-test--done chat))
    (let ((sid (buffer-local-value 'garuda--session-id chat))
          (n (garuda-test--session-count garuda-test-ws)))
      ;; An Emacs restart: no server, no chat buffer.
      (garuda-shutdown)
      (kill-buffer chat)
      (setq chat (garuda garuda-test-ws))
      (with-current-buffer chat
        (should (equal garuda--session-id sid))
        ;; Its context use is in the header from the start, not only after a turn.
        (should (string-match-p "· [0-9.]+k?/128\\.0k ([0-9]+%%)" (garuda--header-line)))
        (should-not (string-match-p "· 0/" (garuda--header-line)))
        (should (string-match-p "> remember-me\n\nNoted\\." (buffer-string)))
        (should (string-match-p "\\[resumed: the next prompt continues this session" (buffer-string)))
        (garuda-send "second")
        (garuda-test--wait (garuda-test--done chat))
        (should (equal garuda--session-id sid))
        (should (string-match-p "Continued\\." (buffer-string))))
      (should (= n (garuda-test--session-count garuda-test-ws)))
      ;; Opening a chat with the setting off shows nothing old and makes no session.
      (kill-buffer chat)
      (let ((garuda-continue-latest nil))
        (setq chat (garuda garuda-test-ws))
        (with-current-buffer chat
          (should-not garuda--session-id)
          (should-not (string-match-p "remember-me" (buffer-string)))
          (should (= n (garuda-test--session-count garuda-test-ws)))
          (garuda-send "third")
          (garuda-test--wait (garuda-test--done chat))
          (should garuda--session-id)
          (should-not (equal garuda--session-id sid))
          (should (= (1+ n) (garuda-test--session-count garuda-test-ws)))))
      ;; A new chat makes no session until its first prompt either.
      (with-current-buffer chat (garuda-new-chat))
      (should (= (1+ n) (garuda-test--session-count garuda-test-ws))))))

(ert-deftest garuda-test-9-allow-always-and-revoke ()
  "Allow always is shown and revocable."
  (let* ((garuda-test-auto "a")
         (garuda-test-prompts nil)
         (chat (garuda-test--fresh (list (garuda-test--tool "a1" "bash" '(:command "echo one"))
                                         (garuda-test--tool "a2" "bash" '(:command "echo two"))
                                         (garuda-test--text "Both ran.")
                                         (garuda-test--tool "a3" "bash" '(:command "echo three"))
                                         (garuda-test--text "Asked again.")))))
    (with-current-buffer chat
      (garuda-send "two commands")
      (garuda-test--wait (garuda-test--done chat))
      (should (= 1 (length garuda-test-prompts)))
      (should (string-match-p "always: bash" (garuda--header-line)))
      (should (string-match-p "bash is always allowed" (buffer-string)))
      (cl-letf (((symbol-function 'completing-read) (lambda (&rest _) "bash")))
        (should (equal (garuda-permissions) "bash")))
      (should-not garuda--always)
      (setq garuda-test-auto "y")
      (garuda-send "once more")
      (garuda-test--wait (garuda-test--done chat))
      (should (= 2 (length garuda-test-prompts))))))

(defun garuda-test--last-message ()
  "The last line of *Messages*."
  (with-current-buffer "*Messages*"
    (save-excursion
      (goto-char (point-max))
      (skip-chars-backward "\n")
      (buffer-substring-no-properties (line-beginning-position) (point)))))

(defvar garuda-test-hand-n 0 "Hand-made approvals queued.")

(defun garuda-test--hand-ask (options)
  "Queue a hand-made approval offering OPTIONS (answered through `garuda--reply')."
  (let ((a (list :id (cl-incf garuda-test-hand-n) :conn 'fake :chat nil :start (float-time)
                 :params (list :sessionId "s" :toolName "test" :title "test: hand-made"
                               :input '(:command "true") :options options))))
    (setq garuda--approvals (append garuda--approvals (list a)))
    (garuda--show-approval a)
    a))

(ert-deftest garuda-test-9a-only-offered-options ()
  "The approval shows exactly the offered options with their names; keys for others answer nothing."
  (let* ((answers nil)
         (once (vector '(:optionId "allow_once" :name "Allow once") '(:optionId "reject" :name "Reject")))
         (modes (vector '(:optionId "acceptEdits" :name "Yes, and accept edits")
                        '(:optionId "default" :name "Yes, ask for each edit")
                        '(:optionId "plan" :name "No, keep planning")))
         (code (garuda-test--code-buffer "offered.txt" ""))
         (win (selected-window)))
    (cl-letf (((symbol-function 'garuda--reply)
               (lambda (_conn _id result) (push (plist-get result :optionId) answers))))
      (should (equal (mapcar (lambda (c) (plist-get c :key)) (garuda--choices once)) '("y" "n")))
      (should (equal (plist-get (car (garuda--choices nil)) :id) "reject"))
      (garuda-test--hand-ask once)
      (should (eq (selected-window) win))
      (let ((shown (with-current-buffer "*garuda approval*" (buffer-string))))
        (should (string-match-p "^  y Allow once$" shown))
        (should (string-match-p "^  n Reject$" shown))
        (should-not (string-match-p "[Aa]lways" shown)))
      (garuda-test--approve "a")
      (should-not answers)
      (should garuda--approvals)
      (should (string-match-p "does not offer allow always" (garuda-test--last-message)))
      (garuda-test--press "RET")
      (garuda-test--press "3")
      (should-not answers)
      (garuda-test--press "y")
      (should (equal answers '("allow_once")))
      (should (eq (selected-window) win))
      ;; Unknown optionIds: their names, by number only; y a n q answer nothing.
      (garuda-test--hand-ask modes)
      (let ((shown (with-current-buffer "*garuda approval*" (buffer-string))))
        (should (string-match-p "^  1 Yes, and accept edits$" shown))
        (should (string-match-p "^  3 No, keep planning$" shown)))
      (garuda-approve)
      (set-buffer (window-buffer))
      (dolist (k '("y" "a" "n" "q" "4" "RET"))
        (garuda-test--press k)
        (should (equal answers '("allow_once"))))
      (garuda-test--press "2")
      (should (equal (car answers) "default"))
      ;; A function approver: an answer not offered answers nothing.
      (let ((garuda-approve-function (lambda (_) "allow_always")))
        (garuda-test--hand-ask once)
        (garuda-approve)
        (should (= 2 (length answers)))
        (should garuda--approvals))
      (let ((garuda-approve-function #'garuda-approve-with-y-or-n-p))
        (cl-letf (((symbol-function 'y-or-n-p) (lambda (&rest _) t)))
          (garuda-approve))
        (should (equal (car answers) "allow_once"))
        (garuda-test--hand-ask modes)
        (cl-letf (((symbol-function 'completing-read) (lambda (_p coll &rest _) (car (last coll)))))
          (garuda-approve))
        (should (equal (car answers) "plan")))
      (should-not garuda--approvals))
    (kill-buffer code)))

(ert-deftest garuda-test-9b-outside-sandbox-under-full-auto ()
  "bash outside_sandbox under full-auto: only allow once / reject, a refused, y runs it;
an earlier \"always\" for bash does not cover it."
  (let* ((garuda-test-auto nil)
         (garuda-policy "full-auto")
         (garuda-test-prompts nil)
         (chat (garuda-test--fresh
                (list (garuda-test--tool "o1" "bash" '(:command "echo escaped-one" :outside_sandbox t))
                      (garuda-test--tool "o2" "bash" '(:command "echo escaped-two" :outside_sandbox t))
                      (garuda-test--text "Both ran.")))))
    (with-current-buffer chat (garuda-send "install it"))
    (garuda-test--wait (lambda () garuda--approvals))
    (garuda-test--pump)
    (let* ((a (car garuda--approvals))
           (params (plist-get a :params))
           (ids (mapcar (lambda (o) (plist-get o :optionId)) (append (plist-get params :options) nil)))
           (confined (not (member "allow_always" ids))))
      (if confined
          (progn
            (should (equal ids '("allow_once" "reject")))
            (should (string-match-p "bash (outside the sandbox, unconfined): echo escaped-one"
                                    (plist-get params :title)))
            (should-not (string-match-p "[Aa]lways" (cdar garuda-test-prompts)))
            (garuda-test--approve "a")
            (should (eq (car garuda--approvals) a))
            (should (string-match-p "does not offer allow always" (garuda-test--last-message))))
        ;; No sandbox on this machine: every command asks under full-auto, as usual.
        (message "no sandbox here: the server offered %S" ids)
        (should (equal ids '("allow_once" "allow_always" "reject"))))
      (with-current-buffer chat (push "bash" garuda--always))
      (garuda-test--approve "y")
      (when confined
        (garuda-test--wait (lambda () (and garuda--approvals (not (eq (car garuda--approvals) a)))))
        (should (string-match-p "escaped-two" (plist-get (plist-get (car garuda--approvals) :params) :title)))
        (garuda-test--approve "y"))
      (garuda-test--wait (garuda-test--done chat))
      (let ((text (garuda-test--text-of chat)))
        (should (string-match-p "    escaped-one" text))
        (should (string-match-p "    escaped-two" text)))
      (with-current-buffer chat (setq garuda--always nil)))))

(ert-deftest garuda-test-9c-plan-approval ()
  "A plan to approve is shown whole, in the chat and the approval buffer, options first;
keys for options not offered and the client's own \"always\" answer nothing; f sends the
words as feedback, a digit sends the mode picked."
  (let* ((garuda-test-auto nil)
         (garuda-policy "plan")
         (garuda-test-prompts nil)
         (replies nil)
         (record (lambda (_conn _id result) (push result replies)))
         (plan-a (concat "# Plan A\n\n"
                         (mapconcat (lambda (i) (format "%d. step %d of plan A" i i))
                                    (number-sequence 1 40) "\n")
                         "\n\nLast line of plan A."))
         (plan-b "# Plan B\n\n1. Write the test first.\n\nLast line of plan B.")
         (chat (garuda-test--fresh
                (list (garuda-test--tool "p1" "exit_plan_mode" (list :plan plan-a))
                      (garuda-test--tool "p2" "exit_plan_mode" (list :plan plan-b)
                                         :match "Write the test first, please.")
                      (garuda-test--text "Carrying out plan B." :match "The user approved your plan")))))
    (advice-add 'garuda--reply :before record)
    (unwind-protect
        (progn
          (with-current-buffer chat (garuda-send "plan the rename"))
          (garuda-test--wait (lambda () garuda--approvals))
          (garuda-test--pump)
          (let* ((a (car garuda--approvals))
                 (shown (cdar garuda-test-prompts))
                 (text (garuda-test--text-of chat)))
            (should (string-match-p "\\`Garuda asks: Approve the plan and leave plan mode\\?" shown))
            (should (string-match-p "^  1 Yes, and edit files without asking$" shown))
            (should (string-match-p "^  n No, keep planning$" shown))
            (should (string-match-p "^  f No, and tell the model what to change" shown))
            (should (string-match-p "^40\\. step 40 of plan A\n\nLast line of plan A\\.$" shown))
            (should (< (string-search "No, keep planning" shown) (string-search "# Plan A" shown)))
            (should-not (string-match-p "[Aa]llow" shown))
            (should (string-match-p "▸ exit_plan_mode: the plan (44 lines)" text))
            (should (string-match-p "  > 40\\. step 40 of plan A\n  >\n  > Last line of plan A\\." text))
            ;; The client's own "always" never answers a plan; keys for other options do nothing.
            (with-current-buffer chat (push "exit_plan_mode" garuda--always))
            (dolist (k '("y" "a" "RET" "5"))
              (garuda-test--approve k)
              (should (eq (car garuda--approvals) a)))
            (should-not replies)
            (cl-letf (((symbol-function 'read-string) (lambda (&rest _) "  ")))
              (garuda-test--approve "f"))
            (should (eq (car garuda--approvals) a))
            (cl-letf (((symbol-function 'read-string)
                       (lambda (prompt &rest _)
                         (should (string-match-p "What should change in the plan" prompt))
                         "Write the test first, please.")))
              (garuda-test--approve "f"))
            (should (equal (car replies) '(:optionId "reject" :feedback "Write the test first, please.")))
            (garuda-test--wait (lambda () (and garuda--approvals (not (eq (car garuda--approvals) a)))))
            (garuda-test--pump)
            (should (string-match-p "Last line of plan B\\." (cdar garuda-test-prompts)))
            (garuda-test--approve "1")
            (should (equal (car replies) '(:optionId "mode:auto-edit")))
            (garuda-test--wait (garuda-test--done chat))
            (let ((text (garuda-test--text-of chat)))
              (should (string-match-p "approval: rejected; told the model: Write the test first, please\\." text))
              (should (string-match-p "approval: Yes, and edit files without asking (mode:auto-edit)" text))
              (should (string-match-p "⚙ plan approved: approvals auto-edit from now on" text))
              (should (string-match-p "Carrying out plan B\\." text)))))
      (advice-remove 'garuda--reply record)
      (with-current-buffer chat (setq garuda--always nil)))))

(ert-deftest garuda-test-a-approval-timeout ()
  "An approval timeout closes the approval buffer and is reported as a timeout."
  (garuda-shutdown)
  (let ((cfg (expand-file-name "garuda/config.toml" (getenv "XDG_CONFIG_HOME")))
        (garuda-test-auto nil))
    (make-directory (file-name-directory cfg) t)
    (with-temp-file cfg (insert "[approval]\ntimeout_secs = 1\n"))
    (unwind-protect
        (let ((chat (garuda-test--fresh (list (garuda-test--tool "t1" "bash" '(:command "echo never"))
                                              (garuda-test--text "I will ask instead.")))))
          (with-current-buffer chat (garuda-send "try it"))
          (garuda-test--wait (lambda () garuda--approvals))
          (garuda-test--wait (lambda () (null garuda--approvals)) 10)
          (should-not (get-buffer "*garuda approval*"))
          (should-not garuda-approval-waiting-mode)
          (garuda-test--wait (garuda-test--done chat))
          (let ((text (garuda-test--text-of chat)))
            (should (string-match-p "approval: timed out after" text))
            (should (string-match-p "⏱ not run: the approval timed out" text))
            (should-not (string-match-p "approval: rejected" text))))
      (delete-file cfg)
      (garuda-shutdown))))

(ert-deftest garuda-test-b-killed-server ()
  "A killed server ends the turn with an error and leaves no orphan process;
the next prompt starts a new server and continues the session."
  (let ((chat (garuda-test--fresh (list (garuda-test--tool "k1" "bash" '(:command "sleep 30; echo garuda-el-orphan")
                                                           :match "sleep")
                                        (garuda-test--text "unreachable" :match "never-sent")
                                        (garuda-test--text "Back again." :match "again")))))
    (with-current-buffer chat (garuda-send "sleep"))
    (garuda-test--wait (lambda () (not (string-empty-p (garuda-test--marked "garuda-el-orphan")))))
    (with-current-buffer chat (garuda-send "queued behind the sleep"))
    (signal-process (process-id (jsonrpc--process garuda--connection)) 'kill)
    (garuda-test--wait (garuda-test--done chat) 10)
    (let ((text (garuda-test--text-of chat)))
      (should (string-match-p "\\[error: garuda exited (killed by signal 9)" text))
      (should (string-match-p "the turn failed: the queued prompt was dropped, not sent: queued behind" text)))
    (garuda-test--wait (lambda () (string-empty-p (garuda-test--marked "garuda-el-orphan"))) 10)
    (let ((sid (buffer-local-value 'garuda--session-id chat)))
      (with-current-buffer chat
        (garuda-send "again")
        (garuda-test--wait (garuda-test--done chat))
        (should (garuda--live-p))
        (should (equal garuda--session-id sid))
        (should (string-match-p "Back again\\." (buffer-string)))))))

(ert-deftest garuda-test-c-doctor-and-words ()
  "The doctor checks the model and key; errors name the Emacs settings."
  (let ((garuda-model nil))
    (should (assq 'error (garuda-doctor)))
    (should (string-match-p "no model configured: set `garuda-model'"
                            (cdr (assq 'error (garuda-doctor))))))
  (let ((garuda-model "anthropic/claude-sonnet-4-5")
        (process-environment (cons "ANTHROPIC_API_KEY" process-environment)))
    (should (cl-find-if (lambda (r) (string-match-p "ANTHROPIC_API_KEY is not set" (cdr r)))
                        (garuda-doctor))))
  (let ((garuda-model (garuda-test--cassette (list (garuda-test--text "x")))))
    (let ((r (garuda-doctor)))
      (should-not (assq 'error r))
      (should (cl-find-if (lambda (x) (string-match-p "^version: " (cdr x))) r))
      (should (cl-find-if (lambda (x) (string-match-p "^server: starts and answers initialize" (cdr x))) r))))
  (should (string-match-p "set `garuda-model'"
                          (garuda--explain "no model configured: pass `model` (e.g. ...)")))
  (should (string-match-p "set `garuda-model'"
                          (garuda--explain "x" '(:kind "config" :reason "noModel"))))
  (should (string-match-p "OPENAI_API_KEY is not set"
                          (garuda--explain "x" '(:kind "config" :reason "missingKey"
                                                 :variable "OPENAI_API_KEY"))))
  (let ((garuda-program (expand-file-name "no-such-garuda" garuda-test-dir))
        (garuda--connection nil))
    (should (string-match-p "set .garuda-program."
                            (cadr (should-error (garuda--connect) :type 'user-error))))))

(ert-deftest garuda-test-c1-misspelled-provider ()
  "A misspelled provider in `garuda-model': the chat says so once, with the likely name and
the setting; the turn does not start."
  (let ((chat (garuda-test--fresh nil)))
    (setq garuda-model "antropic/claude-sonnet-4-5")
    (with-current-buffer chat
      (garuda-send "hello")
      (should-not garuda--running)
      (should-not garuda--session-id)
      (let ((text (buffer-string)))
        (should (string-match-p "\\[error: Garuda: session/new: unknown provider `antropic`.*[Dd]id you mean `anthropic['`]\\?" text))
        (should (string-match-p "the value of .garuda-model." text))
        (should (= 1 (garuda-test--count "unknown provider" text)))))))

(ert-deftest garuda-test-c2-broken-config ()
  "A problem in config.toml: the doctor shows the server's own words (file, line, key), an
unknown key as a warning and a bad value as an error; the chat says why no session starts,
once, the turn does not stay running, the server stays up, and once fixed the next prompt
works without a restart."
  (let* ((cfg (expand-file-name "garuda/config.toml" (getenv "XDG_CONFIG_HOME")))
         (chat (garuda-test--fresh (list (garuda-test--text "Works again.")))))
    (garuda-shutdown)
    (make-directory (file-name-directory cfg) t)
    (with-temp-file cfg (insert "[approval]\ntimeout_sec = 3\n"))
    (unwind-protect
        (progn
          (let* ((report (garuda-doctor))
                 (warn (cdr (cl-find-if (lambda (r) (and (eq (car r) 'warn)
                                                         (string-match-p "config:" (cdr r))))
                                        report))))
            (should warn)
            (should (string-match-p (regexp-quote cfg) warn))
            (should (string-match-p "line 2" warn))
            (should (string-match-p "did you mean `timeout_secs`" warn))
            (should-not (cl-find-if (lambda (r) (eq (car r) 'error)) report)))
          (with-temp-file cfg (insert "[approval]\ntimeout_secs = \"soon\"\n"))
          (let ((err (cdr (cl-find-if (lambda (r) (and (eq (car r) 'error)
                                                       (string-match-p "config:" (cdr r))))
                                      (garuda-doctor)))))
            (should err)
            (should (string-match-p (regexp-quote cfg) err))
            (should (string-match-p "line 2" err))
            (should (string-match-p "approval.timeout_secs" err)))
          (with-current-buffer chat
            (garuda-send "hello")
            (should-not garuda--running)
            (let ((text (buffer-string)))
              (should (string-match-p "\\[error: Garuda: [^\n]*the config file has errors[^\n]*line 2[^\n]*approval.timeout_secs" text))
              (should (= 1 (garuda-test--count "the config file has errors" text)))
              (should-not (string-match-p "Server died\\|jsonrpc-error" text))))
          (should (garuda--live-p))
          (delete-file cfg)
          (with-current-buffer chat
            (garuda-send "hello again")
            (garuda-test--wait (garuda-test--done chat))
            (should (string-match-p "Works again\\." (buffer-string)))))
      (when (file-exists-p cfg) (delete-file cfg)))))

(defun garuda-test--messages ()
  "The text of *Messages*."
  (with-current-buffer (messages-buffer) (buffer-substring-no-properties (point-min) (point-max))))

(ert-deftest garuda-test-c5-every-warning-reaches-the-user ()
  "Every warning of the server is seen: a misspelled key of config.toml (the server's \"did
you mean\") in the echo area with one prefix and in `garuda-doctor'; a project setting the
server ignores (a workspace warning) and an MCP server that did not start, likewise; the
doctor's own server leaves no `[jsonrpc] Server exited' behind."
  (let* ((cfg (expand-file-name "garuda/config.toml" (getenv "XDG_CONFIG_HOME")))
         (ws3 (garuda-test--project "ws3"))
         (default-directory (file-name-as-directory ws3)))
    (garuda-shutdown)
    (setq garuda--warnings nil)
    (make-directory (file-name-directory cfg) t)
    (make-directory (expand-file-name ".garuda" ws3) t)
    (with-temp-file (expand-file-name ".garuda/config.toml" ws3) (insert "model = \"x/y\"\n"))
    (with-temp-file cfg (insert "[approval]\ntimeout_sec = 3\n\n[mcp_servers.missing]\ncommand = \"/nonexistent/mcp-server\"\n"))
    (unwind-protect
        (let ((chat (progn (setq garuda-model (garuda-test--cassette (list (garuda-test--text "Hi."))))
                           (garuda ws3))))
          (with-current-buffer chat (garuda-new-chat) (garuda-send "hello"))
          (garuda-test--wait (garuda-test--done chat))
          (garuda-test--wait (lambda () (string-match-p "MCP server missing" (garuda-test--messages))))
          (let ((said (garuda-test--messages)))
            (should (string-match-p "^Garuda config: [^\n]*timeout_sec[^\n]*did you mean `timeout_secs`" said))
            (should-not (string-match-p "Garuda: Garuda" said))
            (should (string-match-p "^Garuda: [^\n]*\\.garuda/config\\.toml: `model` is ignored here" said))
            (should (string-match-p "^Garuda: MCP server missing failed to start" said)))
          (let ((before (garuda-test--count "Server exited" (garuda-test--messages)))
                (report (garuda-doctor)))
            (cl-flet ((warned (re) (cl-find-if (lambda (r) (and (eq (car r) 'warn) (string-match-p re (cdr r))))
                                               report)))
              (should (warned "did you mean `timeout_secs`"))
              (should (warned "`model` is ignored here"))
              (should (warned "MCP server missing failed to start")))
            (should (= before (garuda-test--count "Server exited" (garuda-test--messages))))))
      (delete-file cfg)
      (garuda-shutdown))))

(ert-deftest garuda-test-c4-blocked-by-a-hook ()
  "A call the user's PreToolUse hook blocked says so and why, is not shown as a failure and
asks nothing; a hook that fails is a warning line."
  (let* ((cfg (expand-file-name "garuda/config.toml" (getenv "XDG_CONFIG_HOME")))
         (garuda-test-auto nil)
         chat)
    (garuda-shutdown)
    (make-directory (file-name-directory cfg) t)
    (with-temp-file cfg
      (insert "[[hooks.PreToolUse]]\nmatcher = \"Bash\"\n"
              "hooks = [{ type = \"command\", command = \"echo 'rm is not allowed here' >&2; exit 2\" }]\n"
              "[[hooks.UserPromptSubmit]]\nhooks = [{ type = \"command\", command = \"exit 7\" }]\n"))
    (unwind-protect
        (progn
          (setq chat (garuda-test--fresh
                      (list (garuda-test--tool "h1" "bash" '(:command "rm -rf build"))
                            (garuda-test--text "Understood."))))
          (with-current-buffer chat
            (garuda-send "clean up")
            (garuda-test--wait (garuda-test--done chat))
            (should-not garuda--approvals)
            (let ((text (garuda-test--text-of chat)))
              (should (string-match-p "▸ bash: rm -rf build\n  ⛔ blocked by a hook: rm is not allowed here" text))
              (should-not (string-match-p "✗ failed" text))
              ;; Said on the call's line, not again as a hook line.
              (should-not (string-match-p "⛔ hook PreToolUse" text))
              (should (string-match-p "⚠ hook UserPromptSubmit failed" text))
              (should-not (string-match-p "approval waiting" text))
              (should (string-match-p "Understood\\." text)))))
      (when (file-exists-p cfg) (delete-file cfg))
      (garuda-shutdown))))

(ert-deftest garuda-test-c3-broken-project-config ()
  "A typo in the project's .garuda/config.toml: the doctor names the file and line, and the
chat shows it once and does not stay running."
  (let* ((ws (garuda-test--project "ws3"))
         (cfg (expand-file-name ".garuda/config.toml" ws))
         (file (expand-file-name "f.txt" ws)))
    (make-directory (file-name-directory cfg) t)
    (with-temp-file cfg (insert "[context]\nauto_compact = maybe\n"))
    (with-temp-file file (insert "x\n"))
    (setq garuda-model (garuda-test--cassette (list (garuda-test--text "x"))))
    (with-current-buffer (find-file-noselect file)
      (let ((err (cdr (cl-find-if (lambda (r) (and (eq (car r) 'error) (string-match-p "project" (cdr r))))
                                  (garuda-doctor)))))
        (should err)
        (should (string-match-p (regexp-quote cfg) err))
        (should (string-match-p "line 2" err)))
      (let ((chat (garuda-send "hello")))
        (with-current-buffer chat
          (should-not garuda--running)
          (should (string-match-p (regexp-quote cfg) (buffer-string)))
          (should (= 1 (garuda-test--count "> hello" (buffer-string)))))
        (kill-buffer chat))
      (kill-buffer))))

(ert-deftest garuda-test-d-y-or-n-p-approver ()
  "A synchronous approver is asked only when the user goes to the approval."
  (let* ((garuda-approve-function #'garuda-approve-with-y-or-n-p)
         (garuda-test-auto nil)
         (asked 0)
         (chat (garuda-test--fresh (list (garuda-test--tool "y1" "bash" '(:command "echo yn-ok"))
                                         (garuda-test--text "Ran it.")))))
    (cl-letf (((symbol-function 'y-or-n-p) (lambda (&rest _) (cl-incf asked) t)))
      (with-current-buffer chat (garuda-send "run"))
      (garuda-test--wait (lambda () garuda--approvals))
      (accept-process-output nil 0.2)
      (should (= asked 0))
      (garuda-approve)
      (should (= asked 1))
      (garuda-test--wait (garuda-test--done chat)))
    (should (string-match-p "    yn-ok" (garuda-test--text-of chat)))))

(defun garuda-test--readme-snippets ()
  "The elisp blocks of the README, in order."
  (with-temp-buffer
    (insert-file-contents (expand-file-name "../README.md" (file-name-directory (symbol-file 'garuda-test--setup))))
    (let ((out nil))
      (while (re-search-forward "^```elisp\n\\(\\(?:.\\|\n\\)*?\n\\)```$" nil t)
        (push (match-string 1) out))
      (nreverse out))))

(ert-deftest garuda-test-e-readme-snippets ()
  "Every elisp snippet of the README evaluates and does what it says, with a running session."
  (let* ((dir (directory-file-name (file-name-directory (symbol-file 'garuda))))
         (snippets (garuda-test--readme-snippets))
         (garuda-model garuda-model)
         (garuda-turn-finished-functions nil))
    (should (>= (length snippets) 3))
    (dolist (snippet snippets)
      (let ((forms (car (read-from-string
                         (concat "(progn " (string-replace "/path/to/garuda/editors/emacs" dir snippet) ")")))))
        (if (and (string-match-p "(use-package " snippet) (not (require 'use-package nil t)))
            ;; Emacs 28 has no use-package: check what the form names instead.
            (pcase-let ((`(progn (use-package garuda . ,args)) forms))
              (should (equal (plist-get args :load-path) dir))
              (dolist (c (plist-get args :commands)) (should (commandp c)))
              (pcase-dolist (`(,var ,_) (cdr (memq :custom args))) (should (custom-variable-p var))))
          (eval forms t))))
    (should (member dir load-path))
    (should (equal garuda-model "anthropic/claude-sonnet-4-5"))
    ;; The hook snippet reports the end of a real turn.
    (should garuda-turn-finished-functions)
    (let ((chat (garuda-test--fresh (list (garuda-test--text "Hooked.")))))
      (with-current-buffer chat (garuda-send "hook"))
      (garuda-test--wait (garuda-test--done chat))
      (should (string-match-p "Garuda: turn ended (end_turn)"
                              (with-current-buffer "*Messages*" (buffer-string)))))))

;;;; Symbol queries (code/findSymbol, code/findReferences) answered from eglot

(defun garuda-test--sym (name kind uri l1 l2 &optional container)
  "A workspace/symbol answer: NAME, LSP KIND, at URI lines L1-L2 (0-based), in CONTAINER."
  (append (list :name name :kind kind)
          (and container (list :containerName container))
          (list :location (list :uri uri :range (list :start (list :line l1 :character 0)
                                                      :end (list :line l2 :character 1))))))

(ert-deftest garuda-test-s1-code-symbols-mapping ()
  "Kinds by name, paths relative to the root, exact then case-insensitive then contained."
  (should (equal (plist-get (plist-get (plist-get (garuda--capabilities) :experimental) :garuda) :codeSymbols) t))
  (let ((garuda-code-symbols nil))
    (should-not (plist-member (plist-get (plist-get (garuda--capabilities) :experimental) :garuda) :codeSymbols)))
  (should (equal (garuda--symbol-kind-name 12) "function"))
  (should (equal (garuda--symbol-kind-name 26) "type_parameter"))
  (should (equal (garuda--symbol-kind-name 22) "enum_member"))
  (should (equal (garuda--relpath "/w/proj" "/w/proj/src/a.ts") "src/a.ts"))
  (should-not (garuda--relpath "/w/proj" "/w/project/a.ts"))
  (should-not (garuda--relpath "/w/proj" "/w/proj/../x.ts"))
  (should (equal (garuda--rank-symbols
                  (vector (garuda-test--sym "parseConfigFile" 12 "file:///w/proj/b.ts" 0 0)
                          (garuda-test--sym "ParseConfig" 5 "file:///w/proj/a.ts" 3 9)
                          (garuda-test--sym "parseConfig" 12 "file:///outside/lib.d.ts" 1 1)
                          (garuda-test--sym "parseConfig" 6 "file:///w/proj/src/x%20y.ts" 4 6 "Loader")
                          (garuda-test--sym "unrelated" 13 "file:///w/proj/a.ts" 1 1)
                          (garuda-test--sym "parseConfig" 12 "untitled:Untitled-1" 1 1))
                  "parseConfig" nil "/w/proj" 10)
                 '((:name "parseConfig" :kind "method" :container "Loader" :path "src/x y.ts" :line 5 :endLine 7 :abs "/w/proj/src/x y.ts")
                   (:name "ParseConfig" :kind "class" :path "a.ts" :line 4 :endLine 10 :abs "/w/proj/a.ts")
                   (:name "parseConfigFile" :kind "function" :path "b.ts" :line 1 :abs "/w/proj/b.ts"))))
  (should (= 1 (length (garuda--rank-symbols (vector (garuda-test--sym "a" 12 "file:///w/proj/a" 0 0)
                                                     (garuda-test--sym "ab" 12 "file:///w/proj/a" 1 1))
                                             "a" nil "/w/proj" 1))))
  (should (equal (plist-get (car (garuda--rank-symbols (vector (garuda-test--sym "Ab" 5 "file:///w/proj/a" 0 0)
                                                               (garuda-test--sym "ab" 12 "file:///w/proj/a" 1 1))
                                                       "ab" "class" "/w/proj" 5))
                            :name)
                 "Ab"))
  (let ((loc (lambda (uri line) (list :uri uri :range (list :start (list :line line :character 0)
                                                             :end (list :line line :character 3))))))
    (should (equal (garuda--reference-items
                    (vector (funcall loc "file:///w/proj/b.ts" 3) (funcall loc "file:///w/proj/a.ts" 2)
                            (funcall loc "file:///w/proj/a.ts" 2) (funcall loc "file:///elsewhere/c.ts" 0))
                    "/w/proj" 10)
                   '((:path "a.ts" :line 3 :abs "/w/proj/a.ts") (:path "b.ts" :line 4 :abs "/w/proj/b.ts")))))
  (should (equal (garuda--identifier-col "export function greet(name) {" nil) '(16)))
  (should (equal (garuda--identifier-col "  x = greetings + greet" "greet") '(18 . t)))
  (should (equal (garuda--lsp-column "// 😀 greet" 5 nil) 6))
  (should (equal (garuda--lsp-column "// 😀 greet" 5 "utf-32") 5)))

(ert-deftest garuda-test-s2-code-symbols-null-and-errors ()
  "Null without an eglot server for the project or for an unknown session; bad params are errors."
  (should-not (garuda--request nil 'code/findSymbol (list :sessionId "no-such-session" :name "greet" :limit 5)))
  (let (got)
    (garuda--code-find-symbol (list :name "greet" :limit 5) garuda-test-ws2 (lambda (r) (setq got (list r))))
    (should (equal got '(nil))))
  (let (got)
    (garuda--code-find-references (list :path "AGENTS.md" :line 1 :limit 5) garuda-test-ws2 (lambda (r) (setq got (list r))))
    (should (equal got '(nil))))
  (dolist (bad '(((:limit 5) . "give `name', or `path' and `line'")
                 ((:path "../x.ts" :line 1) . "outside the workspace")
                 ((:path "a.ts") . "`path' and `line' go together")
                 ((:name "greet" :limit "many") . "`limit' must be a positive number")))
    (let ((err (should-error (garuda--code-find-references (car bad) garuda-test-ws2 #'ignore) :type 'jsonrpc-error)))
      (should (equal (alist-get 'jsonrpc-error-code (cdr err)) -32602))
      (should (string-search (cdr bad) (alist-get 'jsonrpc-error-message (cdr err))))))
  (should-error (garuda--code-find-symbol (list :limit 5) garuda-test-ws2 #'ignore) :type 'jsonrpc-error))

(defun garuda-test--load-eglot ()
  "Load eglot: built in (Emacs 29+), else the copy scripts/provision.sh unpacked."
  (add-to-list 'load-path garuda-test-eglot-dir t)
  (unless (require 'eglot nil t)
    (error "No eglot: %s is missing (run scripts/provision.sh)" garuda-test-eglot-dir)))

(defun garuda-test--ts-project ()
  "A TypeScript project: greet() in src/greet.ts, called from src/a.ts and src/b.ts."
  (let ((root (garuda-test--project "tsproject")))
    (make-directory (expand-file-name "src" root) t)
    (with-temp-file (expand-file-name "tsconfig.json" root)
      (insert "{ \"compilerOptions\": { \"strict\": true, \"target\": \"es2020\", \"module\": \"commonjs\" }, \"include\": [\"src\"] }\n"))
    (with-temp-file (expand-file-name "src/greet.ts" root)
      (insert "/** Says hello. */\nexport function greet(name: string): string {\n  return `hello ${name}`;\n}\n\n"
              "export class Greeter {\n  greetAll(names: string[]): string[] {\n    return names.map(greet);\n  }\n}\n"))
    (with-temp-file (expand-file-name "src/a.ts" root)
      (insert "import { greet } from './greet';\n\nexport const fromA = greet('a');\n"))
    (with-temp-file (expand-file-name "src/b.ts" root)
      (insert "import { greet } from './greet';\n\nexport function fromB(): string {\n  return greet('b');\n}\n"))
    root))

(defun garuda-test--code (method params)
  "Ask the client's dispatcher METHOD with PARAMS as the server would; the answer."
  (let* ((got nil)
         (d (garuda--request nil method params)))
    (cl-letf (((symbol-function 'garuda--reply) (lambda (_conn _id result) (setq got (list result)))))
      (should (eq (car d) 'garuda--deferred))
      (funcall (cdr d) nil 1)
      (garuda-test--wait (lambda () got) 30))
    (car got)))

(ert-deftest garuda-test-s3-code-symbols-from-eglot ()
  "code/findSymbol and code/findReferences answered from eglot running typescript-language-server."
  (garuda-test--load-eglot)
  (let* ((tsls (expand-file-name "node_modules/.bin/typescript-language-server" garuda-test-lsp-dir))
         (root (garuda-test--ts-project))
         (chat (generate-new-buffer " *garuda symbols chat*"))
         (sid "code-symbols-eglot")
         (eglot-server-programs
          `((typescript-mode . (,tsls "--stdio" :initializationOptions
                                      (:tsserver (:path ,(expand-file-name "node_modules/typescript/lib" garuda-test-lsp-dir))))))))
    (should (file-executable-p tsls))
    (unless (fboundp 'typescript-mode) (define-derived-mode typescript-mode prog-mode "TS"))
    (let ((auto-mode-alist (cons '("\\.ts\\'" . typescript-mode) auto-mode-alist)))
      (with-current-buffer chat (setq-local garuda--root root))
      (puthash sid chat garuda--buffers)
      (unwind-protect
          (progn
            (with-current-buffer (find-file-noselect (expand-file-name "src/a.ts" root))
              (call-interactively #'eglot)
              (garuda-test--wait (lambda () (eglot-current-server)) 30))
            ;; tsserver loads the project after the first file opens: ask until it knows greet.ts.
            (let (got (deadline (+ (float-time) 60)))
              (while (and (< (float-time) deadline)
                          (not (= 3 (length (plist-get got :items)))))
                (setq got (garuda-test--code 'code/findSymbol (list :sessionId sid :name "greet" :limit 10)))
                (unless (= 3 (length (plist-get got :items))) (sleep-for 0.2)))
              (should (equal got
                             '(:source "typescript-language-server"
                                       :items [(:name "greet" :kind "function" :path "src/greet.ts" :line 2 :endLine 4
                                                      :signature "export function greet(name: string): string {")
                                               (:name "Greeter" :kind "class" :path "src/greet.ts" :line 6 :endLine 10
                                                      :signature "export class Greeter {")
                                               (:name "greetAll" :kind "method" :path "src/greet.ts" :line 7 :endLine 9
                                                      :signature "greetAll(names: string[]): string[] {")]))))
            (should (equal (plist-get (garuda-test--code 'code/findSymbol (list :sessionId sid :name "greet" :kind "class" :limit 5)) :items)
                           [(:name "Greeter" :kind "class" :path "src/greet.ts" :line 6 :endLine 10 :signature "export class Greeter {")]))
            (let ((refs '(:source "typescript-language-server"
                                  :items [(:path "src/a.ts" :line 1 :text "import { greet } from './greet';")
                                          (:path "src/a.ts" :line 3 :text "export const fromA = greet('a');")
                                          (:path "src/b.ts" :line 1 :text "import { greet } from './greet';")
                                          (:path "src/b.ts" :line 4 :text "return greet('b');")
                                          (:path "src/greet.ts" :line 8 :text "return names.map(greet);")])))
              (should (equal (garuda-test--code 'code/findReferences (list :sessionId sid :name "greet" :limit 50)) refs))
              (should (equal (garuda-test--code 'code/findReferences (list :sessionId sid :path "src/greet.ts" :line 2 :limit 50)) refs))
              (should (equal (garuda-test--code 'code/findReferences (list :sessionId sid :name "greet" :path "src/b.ts" :line 4 :limit 2))
                             (list :source "typescript-language-server" :items (seq-take (plist-get refs :items) 2)))))
            (should (equal (garuda-test--code 'code/findSymbol (list :sessionId sid :name "noSuchThing" :limit 5)) nil))
            ;; A FIFO (outside tsconfig's src, so tsserver never reads it) is never opened.
            (call-process "mkfifo" nil nil nil (expand-file-name "pipe.ts" root))
            (should-not (garuda--readable-p (expand-file-name "pipe.ts" root)))
            (should (garuda--readable-p (expand-file-name "src/a.ts" root)))
            (should (equal (garuda-test--code 'code/findReferences (list :sessionId sid :path "pipe.ts" :line 1 :limit 5)) nil))
            (should-error (garuda--request nil 'code/findReferences (list :sessionId sid :limit 5)) :type 'jsonrpc-error)
            ;; A request the server fails answers null through the same path.
            (let (got)
              (garuda--code-ask (car (garuda--eglot-servers root :referencesProvider)) :garuda/noSuchMethod nil
                                (lambda (r) (setq got (list r))))
              (garuda-test--wait (lambda () got) 30)
              (should (equal got '(nil)))))
        (remhash sid garuda--buffers)
        (kill-buffer chat)
        (ignore-errors (eglot-shutdown (car (garuda--eglot-servers root :referencesProvider))))
        (dolist (b (buffer-list))
          (when (and (buffer-file-name b) (garuda--relpath root (buffer-file-name b)))
            (kill-buffer b)))))))

(ert-deftest garuda-test-z-shutdown ()
  "Shutdown ends the server and leaves no process behind; the events log is bounded."
  (garuda--connect)
  (should (equal (jsonrpc--events-buffer-scrollback-size garuda--connection) garuda-events-buffer-size))
  (let* ((proc (jsonrpc--process garuda--connection))
         (pid (process-id proc)))
    (garuda-shutdown)
    (should-not (process-live-p proc))
    (should-not garuda--connection)
    (should (equal (process-exit-status proc) 0))
    (should-not (member pid (list-system-processes)))))

;;; garuda-test.el ends here
