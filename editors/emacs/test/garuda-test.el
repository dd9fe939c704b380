;;; garuda-test.el --- ERT tests of garuda.el against the real binary  -*- lexical-binding: t; -*-

;; Run: GARUDA_BIN=/path/to/garuda emacs --batch -L editors/emacs -l editors/emacs/test/garuda-test.el -f ert-run-tests-batch-and-exit
;; HOME and the XDG dirs are pointed at a temp dir, and the model is a replay cassette.

;;; Code:

(require 'ert)
(require 'garuda)

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
  "Press KEYS in the approval buffer."
  (let ((buf (get-buffer "*garuda approval*")))
    (should (buffer-live-p buf))
    (with-selected-window (or (get-buffer-window buf) (display-buffer buf))
      (set-buffer buf)
      (execute-kbd-macro (kbd keys)))))

(defun garuda-test--pump ()
  "Record the approval on screen and answer it with `garuda-test-auto'."
  (when garuda--approvals
    (let ((buf (get-buffer "*garuda approval*")))
      (when (and (buffer-live-p buf) (not (memq buf (mapcar #'car garuda-test-prompts))))
        (push (cons buf (with-current-buffer buf (buffer-string))) garuda-test-prompts))
      (when (and garuda-test-auto (buffer-live-p buf))
        (garuda-test--press garuda-test-auto)))))

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

(ert-deftest garuda-test-1-start-and-turn ()
  "RET at the approval does not approve; y does; the answer streams; the tool output is folded."
  (let* ((garuda-test-auto nil)
         (buf (garuda-test--fresh
               (list (garuda-test--tool "toolu_1" "bash" '(:command "echo garuda-ok"))
                     (garuda-test--line (list '(:type "thinking" :thinking "The user wants it.")
                                              '(:type "text" :text "The command printed garuda-ok."))
                                        "end_turn" :chunks ["The command" " printed" " garuda-ok."])))))
    (with-current-buffer buf
      (should (garuda--live-p))
      (should garuda--session-id)
      (goto-char (point-max))
      (insert "please run echo")
      (garuda-send-input)
      (garuda-test--wait (lambda () garuda--approvals))
      (garuda-test--pump)
      (should (string-match-p "bash: echo garuda-ok" (cdar garuda-test-prompts)))
      (garuda-test--press "RET")
      (accept-process-output nil 0.2)
      (should garuda--approvals)
      (should garuda--running)
      (garuda-test--press "y")
      (garuda-test--wait (garuda-test--done buf))
      (should (equal (plist-get garuda--last-result :stopReason) "end_turn"))
      (let ((text (garuda-test--text-of buf)))
        (should (string-match-p "please run echo\n+▸ bash: echo garuda-ok\n  approval: allowed once\n  ✓ done · exit 0" text))
        (should (string-match-p "The command printed garuda-ok\\.\n\\[end_turn\\]" text))
        (should (string-match-p "💭 thinking" text)))
      ;; The tool output is there but hidden until TAB.
      (goto-char (point-min))
      (search-forward "    garuda-ok")
      (should (invisible-p (point)))
      (should (string-match-p "replay:" (garuda--header-line)))
      (should (string-match-p "/128.0k" (garuda--header-line)))
      (message "TIMING emacs: command to first streamed character %.1f ms"
               (* 1000 (- garuda--first-delta garuda--turn-start))))))

(ert-deftest garuda-test-2-cancel ()
  "Approve a slow bash call, cancel the turn: stopReason cancelled."
  (let ((buf (garuda-test--fresh
              (list (garuda-test--tool "toolu_2" "bash" '(:command "sleep 30; echo garuda-el-cancel"))
                    (garuda-test--text "no")))))
    (with-current-buffer buf
      (garuda-send "slow please")
      (garuda-test--wait (lambda () (not (string-empty-p (garuda-test--marked "garuda-el-cancel")))))
      (should (eq t (plist-get (garuda-cancel) :ok)))
      (garuda-test--wait (garuda-test--done buf))
      (should (equal (plist-get garuda--last-result :stopReason) "cancelled"))
      (should (string-match-p "\\[cancelled\\]" (buffer-string)))
      (garuda-test--wait (lambda () (string-empty-p (garuda-test--marked "garuda-el-cancel")))))))

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
      (garuda-test--press "RET")
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

(ert-deftest garuda-test-4-switch-project-and-send-from-a-file ()
  "`garuda-send' from a file buffer asks that file's project; each project has its session."
  (let* ((chat1 (garuda-test--fresh (list (garuda-test--text "In project one."))))
         (s1 (buffer-local-value 'garuda--session-id chat1))
         (file2 (expand-file-name "main.txt" garuda-test-ws2)))
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
    (should-not (string-match-p "In project two" (garuda-test--text-of chat1)))))

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
  "Text sent while a turn runs stays on screen, is queued, then sent."
  (let ((chat (garuda-test--fresh (list (garuda-test--tool "s1" "bash" '(:command "sleep 1"))
                                        (garuda-test--text "First done.")
                                        (garuda-test--text "Second done.")))))
    (with-current-buffer chat
      (goto-char (point-max)) (insert "first") (garuda-send-input)
      (garuda-test--wait (lambda () (buffer-local-value 'garuda--running chat)))
      (goto-char (point-max)) (insert "second question") (garuda-send-input)
      (should (string-match-p "second question\n⏳ queued" (buffer-string)))
      (garuda-test--wait (lambda () (string-match-p "Second done\\." (buffer-string))))
      (garuda-test--wait (garuda-test--done chat)))))

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

(ert-deftest garuda-test-7-compaction-and-resume ()
  "Compaction is one line with the numbers; a resumed session shows the summary as a summary."
  (let ((lines nil))
    (with-temp-file (expand-file-name "big.txt" garuda-test-ws)
      (dotimes (i 800) (insert (format "filler line %d of the big file\n" i))))
    (dotimes (i 6)
      (push (garuda-test--tool (format "r%d" i) "read_file" '(:path "big.txt") :tokens 20000) lines)
      (push (garuda-test--text (format "answer %d" i) :tokens 20000) lines))
    (push (garuda-test--text "SUMMARY-OF-THE-SESSION") lines)
    (let* ((chat (garuda-test--fresh (nreverse lines)))
           (sid (buffer-local-value 'garuda--session-id chat)))
      (with-current-buffer chat
        (dotimes (i 6)
          (garuda-send (format "question %d" i))
          (garuda-test--wait (garuda-test--done chat)))
        (should (eq t (plist-get (garuda-compact "the answers") :compacted)))
        (let ((text (buffer-string)))
          (should (= 1 (cl-count ?⟲ text)))
          (should (string-match-p "⟲ context compacted (manual, summary): 20\\.0k → " text)))
        (should-not garuda--activity)
        (with-current-buffer (garuda-summary)
          (should (string-match-p "SUMMARY-OF-THE-SESSION" (buffer-string))))
        (cl-letf (((symbol-function 'completing-read)
                   (lambda (_p table &rest _)
                     (let* ((all (all-completions "" table))
                            (meta (funcall table "" nil 'metadata)))
                       (should (eq (alist-get 'display-sort-function (cdr meta)) 'identity))
                       (should (string-match-p "question 0" (car all)))
                       (car all)))))
          (should (equal (garuda-sessions) sid)))
        (let ((text (garuda-test--text-of chat)))
          (should (string-match-p "⟲ earlier conversation compacted; the model continues from this summary" text))
          (should (string-match-p "SUMMARY-OF-THE-SESSION" text))
          (should-not (string-match-p "> This session continues" text))
          (should (= 1 (cl-count-if (lambda (l) (equal l "> question 5")) (split-string text "\n"))))
          (should (= 1 (cl-count-if (lambda (l) (equal l "> question 0")) (split-string text "\n")))))))))

(ert-deftest garuda-test-8-sessions-newest-first ()
  "The picker lists newest first and leaves out headless runs."
  (let ((sorted (garuda--sorted-sessions
                 (vector '(:sessionId "a" :created 1000 :title "old" :messageCount 2)
                         '(:sessionId "b" :created 3000 :title "new" :messageCount 4)
                         '(:sessionId "c" :created 5000 :title "exec" :origin "exec")
                         '(:sessionId "d" :created 2000 :updated 9000 :title "active")))))
    (should (equal (mapcar (lambda (s) (plist-get s :sessionId)) sorted) '("d" "b" "a")))
    (should (string-match-p "  new  (4 messages)" (garuda--session-label (cadr sorted))))))

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
          (garuda-test--wait (garuda-test--done chat))
          (let ((text (garuda-test--text-of chat)))
            (should (string-match-p "approval: timed out after" text))
            (should (string-match-p "⏱ not run: the approval timed out" text))
            (should-not (string-match-p "approval: rejected" text))))
      (delete-file cfg)
      (garuda-shutdown))))

(ert-deftest garuda-test-b-killed-server ()
  "A killed server ends the turn with an error and leaves no orphan process."
  (let ((chat (garuda-test--fresh (list (garuda-test--tool "k1" "bash" '(:command "sleep 30; echo garuda-el-orphan"))
                                        (garuda-test--text "unreachable")))))
    (with-current-buffer chat (garuda-send "sleep"))
    (garuda-test--wait (lambda () (not (string-empty-p (garuda-test--marked "garuda-el-orphan")))))
    (signal-process (process-id (jsonrpc--process garuda--connection)) 'kill)
    (garuda-test--wait (garuda-test--done chat) 10)
    (should (string-match-p "\\[error: garuda exited (killed by signal 9)" (garuda-test--text-of chat)))
    (garuda-test--wait (lambda () (string-empty-p (garuda-test--marked "garuda-el-orphan"))) 10)
    ;; The next command starts a new server and reloads the session.
    (let ((sid (buffer-local-value 'garuda--session-id chat)))
      (with-current-buffer (garuda garuda-test-ws)
        (should (garuda--live-p))
        (should (equal garuda--session-id sid))))))

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
      (should (cl-find-if (lambda (x) (string-match-p "^version: " (cdr x))) r))))
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

(ert-deftest garuda-test-d-y-or-n-p-approver ()
  "A synchronous approver still works (run outside the process filter)."
  (let* ((garuda-approve-function #'garuda-approve-with-y-or-n-p)
         (chat (garuda-test--fresh (list (garuda-test--tool "y1" "bash" '(:command "echo yn-ok"))
                                         (garuda-test--text "Ran it.")))))
    (cl-letf (((symbol-function 'y-or-n-p) (lambda (&rest _) t)))
      (with-current-buffer chat (garuda-send "run"))
      (garuda-test--wait (garuda-test--done chat)))
    (should (string-match-p "    yn-ok" (garuda-test--text-of chat)))))

(ert-deftest garuda-test-z-shutdown ()
  "Shutdown ends the server and leaves no process behind; the events log is bounded."
  (garuda garuda-test-ws)
  (should (equal (jsonrpc--events-buffer-scrollback-size garuda--connection) garuda-events-buffer-size))
  (let* ((proc (jsonrpc--process garuda--connection))
         (pid (process-id proc)))
    (garuda-shutdown)
    (should-not (process-live-p proc))
    (should-not garuda--connection)
    (should (equal (process-exit-status proc) 0))
    (should-not (member pid (list-system-processes)))))

;;; garuda-test.el ends here
