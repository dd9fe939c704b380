;;; garuda-test.el --- ERT tests of garuda.el against the real binary  -*- lexical-binding: t; -*-

;; Run: GARUDA_BIN=/path/to/garuda emacs --batch -L editors/emacs -l editors/emacs/test/garuda-test.el -f ert-run-tests-batch-and-exit
;; HOME and the XDG dirs are pointed at a temp dir, and the model is a replay cassette.

;;; Code:

(require 'ert)
(require 'garuda)

(defconst garuda-test-mark "garuda-emacs-test"
  "Marker in the slow bash command, to find leftover processes.")

(defvar garuda-test-dir (make-temp-file "garuda-el-" t))

(defun garuda-test--cassette ()
  "Write the replay cassette; return its path."
  (let ((path (expand-file-name "cassette.jsonl" garuda-test-dir))
        (lines
         `((:response (:content [(:type "tool_use" :id "toolu_1" :name "bash"
                                  :input (:command "echo garuda-ok"))]
                       :stopReason "tool_use")
            :match "please run")
           (:response (:content [(:type "text" :text "The command printed garuda-ok.")]
                       :stopReason "end_turn"
                       :usage (:inputTokens 50 :outputTokens 7))
            :chunks ["The command" " printed" " garuda-ok."]
            :match "garuda-ok")
           (:response (:content [(:type "tool_use" :id "toolu_2" :name "bash"
                                  :input (:command ,(concat "sleep 30; echo " garuda-test-mark)))]
                       :stopReason "tool_use")
            :match "slow")
           (:response (:content [(:type "text" :text "Summary: echo and a slow command.")]
                       :stopReason "end_turn"))
           (:response (:content [(:type "text" :text "Spare answer.")] :stopReason "end_turn")))))
    (with-temp-file path
      (dolist (l lines) (insert (json-serialize l) "\n")))
    path))

(defun garuda-test--setup ()
  "Isolate HOME/XDG dirs, point garuda.el at the binary and the cassette."
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
          garuda-model (concat "replay:" (garuda-test--cassette))
          garuda-policy "ask")))

(garuda-test--setup)

(defvar garuda-test-ws
  (let ((ws (expand-file-name "ws" garuda-test-dir)))
    (make-directory ws t)
    (with-temp-file (expand-file-name "AGENTS.md" ws) (insert "# Test project\nBe brief.\n"))
    ws))

(defun garuda-test--wait (pred &optional what)
  "Pump process output until PRED is true (a 60 s safety net, not a time limit under test)."
  (let ((deadline (+ (float-time) 60)))
    (while (and (not (funcall pred)) (< (float-time) deadline))
      (accept-process-output nil 0.02))
    (should (funcall pred))
    what))

(defun garuda-test--marked-processes ()
  "Output of pgrep for the slow command's marker."
  (with-temp-buffer
    ;; pgrep itself, not a shell: a shell's command line would contain the marker too.
    (call-process "pgrep" nil t nil "-f" garuda-test-mark)
    (string-trim (buffer-string))))

(defvar garuda-test-approvals nil "Permission requests seen by the stub.")

(defun garuda-test--approve (params)
  "Stub approver: record PARAMS and allow once."
  (push params garuda-test-approvals)
  "allow_once")

(ert-deftest garuda-test-1-start-and-turn ()
  "Start, open the workspace, run a turn that needs approval, see the streamed text."
  (let* ((garuda-approve-function #'garuda-test--approve)
         (deltas 0)
         (count (lambda (_sid ev) (when (equal (plist-get ev :kind) "textDelta") (cl-incf deltas))))
         (buf (garuda garuda-test-ws)))
    (add-hook 'garuda-event-functions count)
    (unwind-protect
        (with-current-buffer buf
          (should (garuda--live-p))
          (should garuda--session-id)
          (goto-char (point-max))
          (insert "please run echo")
          (garuda-send-input)
          (garuda-test--wait (lambda () (not garuda--running)))
          (should (equal (plist-get garuda--last-result :stopReason) "end_turn"))
          (should (= (length garuda-test-approvals) 1))
          (should (equal (plist-get (car garuda-test-approvals) :toolName) "bash"))
          (should (>= deltas 2))
          (should (string-match-p "please run echo\n+\\[tool bash [^]]*\\]\nThe command printed garuda-ok\\.\n\\[end_turn\\]"
                                  (buffer-string)))
          (message "TIMING emacs: command to first streamed character %.1f ms"
                   (* 1000 (- garuda--first-delta garuda--turn-start))))
      (remove-hook 'garuda-event-functions count))))

(ert-deftest garuda-test-2-cancel ()
  "Approve a slow bash call, cancel the turn: stopReason cancelled."
  (let* ((garuda-approve-function #'garuda-test--approve)
         (started nil)
         (watch (lambda (_sid ev) (when (equal (plist-get ev :kind) "toolCallStarted") (setq started t))))
         (buf (garuda garuda-test-ws)))
    (add-hook 'garuda-event-functions watch)
    (unwind-protect
        (with-current-buffer buf
          (garuda-send "slow please")
          (garuda-test--wait (lambda () started))
          ;; Cancel while the command really runs (as a person would).
          ;; (`sleep 30; echo MARK' keeps bash, and the marker, alive: a lone command is exec'd.)
          (garuda-test--wait (lambda () (not (string-empty-p (garuda-test--marked-processes)))))
          (should (eq t (plist-get (garuda-cancel) :ok)))
          (garuda-test--wait (lambda () (not garuda--running)))
          (should (equal (plist-get garuda--last-result :stopReason) "cancelled"))
          (should (string-match-p "\\[cancelled\\]" (buffer-string))))
      (remove-hook 'garuda-event-functions watch))))

(ert-deftest garuda-test-3-sessions ()
  "The session is listed and can be resumed with its history."
  (with-current-buffer (garuda garuda-test-ws)
    (let ((sid garuda--session-id))
      (cl-letf (((symbol-function 'completing-read)
                 (lambda (_p choices &rest _)
                   (car (seq-find (lambda (c) (equal (cdr c) sid)) choices)))))
        (should (equal (garuda-sessions) sid)))
      (should (string-match-p "\\[resumed .*\\]\nuser: please run echo" (buffer-string))))))

(ert-deftest garuda-test-4-compact-and-context ()
  "Compaction and context/inspect answer."
  (with-current-buffer (garuda garuda-test-ws)
    (should (garuda-compact "the echo"))
    (should (garuda-context))))

(ert-deftest garuda-test-5-approve-with-completing-read ()
  "The default approver maps the picked name to its optionId."
  (cl-letf (((symbol-function 'completing-read) (lambda (&rest _) "Reject")))
    (should (equal (garuda-approve-with-completing-read
                    '(:title "bash: ls" :options [(:optionId "allow_once" :name "Allow once")
                                                   (:optionId "reject" :name "Reject")]))
                   "reject"))))

(ert-deftest garuda-test-9-shutdown ()
  "Shutdown ends the server and leaves no process behind."
  (garuda garuda-test-ws)
  (let* ((proc (jsonrpc--process garuda--connection))
         (pid (process-id proc)))
    (garuda-shutdown)
    (should-not (process-live-p proc))
    (should-not garuda--connection)
    (should (equal (process-exit-status proc) 0))
    (should-not (member pid (list-system-processes)))
    (garuda-test--wait (lambda () (string-empty-p (garuda-test--marked-processes))))))

;;; garuda-test.el ends here
