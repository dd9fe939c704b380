;;; garuda.el --- Chat with the Garuda context engine  -*- lexical-binding: t; -*-

;; Version: 0.2.0
;; Package-Requires: ((emacs "28.1") (jsonrpc "1.0.14"))
;; Keywords: tools, ai
;; URL: https://example.invalid/garuda

;;; Commentary:

;; A thin client for `garuda serve' over the built-in `jsonrpc.el'.
;;
;; M-x garuda opens the chat buffer of the current project (one per
;; project root, each with its own session).  Type after the prompt;
;; RET sends, C-j inserts a newline.  Text typed while a turn runs is
;; queued and sent when it ends.  From a file buffer, `garuda-send'
;; asks the project's chat, and `garuda-send-region' sends the region
;; (or the whole buffer) with a question.
;;
;; An approval is shown in a window that does not take the keyboard
;; (and in the chat and the mode line); keys typed elsewhere never answer
;; it.  C-c C-a (`garuda-approve') moves to it.  It offers exactly the
;; options the request names, with the server's names: y allows once, a
;; allows always (this session, revocable with `garuda-permissions'), n
;; or q rejects, each only when offered (another says it is not
;; offered), a digit picks the option of that number (any optionId);
;; RET does nothing.  A plan to approve (plan mode's `exit_plan_mode')
;; is shown whole, in the chat and in the approval buffer below the
;; options; f there rejects it with your words for the model.  Edits go
;; through Emacs buffers
;; (`workspace/applyEdit'): undoable, written by Emacs.  Other commands:
;; `garuda-new-chat', `garuda-sessions', `garuda-compact',
;; `garuda-summary', `garuda-context', `garuda-cancel', `garuda-doctor',
;; `garuda-shutdown'.

;;; Code:

(require 'cl-lib)
(require 'jsonrpc)
(require 'json)
(require 'project)
(require 'subr-x)
(require 'seq)
(require 'diff-mode)
(require 'url-util)

(defgroup garuda nil
  "Chat with the Garuda context engine."
  :group 'tools
  :prefix "garuda-")

(defcustom garuda-program "garuda"
  "Path of the garuda binary."
  :type 'string)

(defcustom garuda-program-args '("serve")
  "Arguments given to `garuda-program'."
  :type '(repeat string))

(defcustom garuda-model nil
  "Model spec for new sessions, e.g. \"anthropic/claude-sonnet-4-5\".
nil uses the model configured in Garuda's config.toml."
  :type '(choice (const :tag "Configured default" nil) string))

(defcustom garuda-policy "ask"
  "Approval policy for new sessions."
  :type '(choice (const "ask") (const "auto-edit") (const "full-auto") (const "plan")))

(defcustom garuda-approve-function #'garuda-approve-with-buffer
  "Function that answers a `permission/request'.
`garuda-approve-with-buffer' (the default): `garuda-approve' (C-c C-a)
moves to the approval buffer, where the keys of the offered options
answer.  Any other function is called by `garuda-approve' (never when
the approval arrives, so it cannot catch keys typed for something else)
with the request params (a plist with :title, :toolName, :input and
:options) and returns the chosen optionId string; an optionId the
request does not offer answers nothing (the approval keeps waiting)."
  :type '(choice (function-item garuda-approve-with-buffer)
                 (function-item garuda-approve-with-y-or-n-p)
                 function))

(defcustom garuda-request-timeout 30
  "Seconds to wait for a reply to a short request."
  :type 'integer)

(defcustom garuda-events-buffer-size 100000
  "Characters kept in the `*garuda events*' log (0 turns it off)."
  :type 'integer)

(defcustom garuda-continue-latest t
  "Non-nil: a project's chat continues its latest session.
Opening the chat after Emacs starts shows that session's history, and
the first prompt continues it.  nil: the first prompt starts a new
session.  Either way, opening the chat creates no session."
  :type 'boolean)

(defcustom garuda-environment nil
  "Extra environment for the server, e.g. (\"ANTHROPIC_API_KEY=...\")."
  :type '(repeat string))

(defcustom garuda-code-symbols t
  "Non-nil: Garuda's find_symbol and find_references are asked of eglot first.
`initialize' then declares `codeSymbols', and the server's `code/findSymbol' and
`code/findReferences' requests are answered from the eglot server of the
project (null, so Garuda uses its own index, when there is none)."
  :type 'boolean)

(defcustom garuda-code-symbols-timeout 2.5
  "Seconds a language server may take to answer a symbol query.
Garuda itself waits 3 seconds; after this the answer is null."
  :type 'number)

(defface garuda-note-face '((t :inherit font-lock-comment-face))
  "Face of notes in the chat.")
(defface garuda-tool-face '((t :inherit font-lock-function-name-face))
  "Face of tool call lines.")
(defface garuda-thinking-face '((t :inherit shadow))
  "Face of thinking text.")
(defface garuda-error-face '((t :inherit error))
  "Face of errors.")

(defvar garuda-event-functions nil
  "Abnormal hook run with (SESSION-ID EVENT) for every `turn/update'.
Events relayed from an agent go to `garuda-agent-event-functions' instead.")

(defvar garuda-agent-event-functions nil
  "Abnormal hook run with (SESSION-ID AGENT EVENT) for a relayed event.
AGENT is the plist (:name :sessionId :toolCallId): the agent, its
sub-session and the explore/agent call running it.  EVENT is the
agent's own, never the session's.")

(defvar garuda-turn-finished-functions nil
  "Abnormal hook run with (SESSION-ID RESULT-OR-ERROR) when a turn ends.")

(defvar garuda--connection nil "The running connection.")
(defvar garuda--workspaces nil "Alist of workspace root to workspaceId.")
(defvar garuda--buffers (make-hash-table :test #'equal) "Session id to chat buffer.")
(defvar garuda--marker nil "GARUDA_OWNER value of the running server.")
(defvar garuda--approvals nil "Pending approvals, oldest first.")
(defvar garuda--stopping nil "Non-nil while `garuda-shutdown' runs.")
(defvar garuda--approval-return nil "Window to go back to once the approval is answered.")

(defvar-local garuda--session-id nil "The chat buffer's session (nil until the first prompt).")
(defvar-local garuda--session-conn nil "The connection that has loaded the session.")
(defvar-local garuda--fresh nil "Non-nil: the next prompt starts a new session.")
(defvar-local garuda--workspace-id nil "The chat buffer's workspace.")
(defvar-local garuda--root nil "The chat buffer's project root.")
(defvar-local garuda--model nil "The chat buffer's model.")
(defvar-local garuda--window nil "Context window of the model.")
(defvar-local garuda--context-tokens nil "Context tokens of the last step.")
(defvar-local garuda--cache-ratio nil
  "Share of the session's prompts read from the provider's cache.
As of the last step.")
(defvar-local garuda--cache-miss nil
  "Why the last step's request missed the cache (a plist with :cause), or nil.")
(defvar-local garuda--input-marker nil "Start of the input area (after the prompt).")
(defvar-local garuda--output-marker nil "Where streamed text goes (before the prompt).")
(defvar-local garuda--running nil "Non-nil while a turn runs.")
(defvar-local garuda--activity nil "What the running turn does now, for the header line.")
(defvar-local garuda--agent-step nil "The running agent's latest step, for the header line.")
(defvar-local garuda--agent-text nil "Alist: explore/agent call id to a tail of its agent's text.")
(defvar-local garuda--mode nil "What was streamed last: text, thinking or tool.")
(defvar-local garuda--queue nil "Prompts typed while a turn ran, oldest first.")
(defvar-local garuda--always nil "Tools allowed always in this session (client side).")
(defvar-local garuda--timed-out nil "Alist of toolCallId to seconds for approvals that timed out.")
(defvar-local garuda--compaction-seen nil "A compaction event arrived for the last request.")
(defvar-local garuda--last-result nil "Result plist (or error) of the last turn.")
(defvar-local garuda--dropped-note nil "Queued prompts dropped during the turn, said at its end.")
(defvar-local garuda--turn-from nil "Where the running or last turn's text starts.")
(defvar-local garuda--turn-start nil "`float-time' when the last turn was sent.")
(defvar-local garuda--first-delta nil "`float-time' of the last turn's first text.")

;;;; Words

(defun garuda--explain (message &optional data)
  "MESSAGE from the server in this client's words (names the Emacs settings).
DATA is the error's data plist, whose :reason names a configuration problem."
  (let ((message (or message "unknown error"))
        (reason (and (listp data) (plist-get data :reason)))
        (variable (and (listp data) (plist-get data :variable))))
    (when (and (equal reason "missingKey") (stringp variable))
      (setq message (format "set the environment variable %s" variable)))
    (cond
     ((or (equal reason "noModel") (string-match-p "no model configured" message))
      (concat "no model configured: set `garuda-model' (M-x customize-variable RET garuda-model), "
              "e.g. \"anthropic/claude-sonnet-4-5\" or \"ollama/qwen3-coder\", or put "
              "model = \"...\" in ~/.config/garuda/config.toml.  M-x garuda-doctor checks the setup"))
     ((string-match "set the environment variable \\([A-Z0-9_]+\\)" message)
      (let ((var (match-string 1 message)))
        (format "%s is not set: set it in Emacs's environment (M-x setenv) or add \"%s=...\" to `garuda-environment'"
                var var)))
     (t (let ((hint (garuda--did-you-mean message)))
          (if hint
              (replace-regexp-in-string "unknown provider `[^`]+`" (lambda (m) (concat m hint)) message t t)
            message))))))

(defun garuda--did-you-mean (message)
  "\" (did you mean ...?)\" for an unknown provider in MESSAGE, from its list.
The server may say it itself one day; then nothing is added."
  (when (and (not (string-match-p "did you mean" message))
             (string-match "unknown provider `\\([^`]+\\)'?`?[^:]*: *\\([a-z0-9_, -]+\\)" message))
    (let* ((bad (match-string 1 message))
           (names (split-string (match-string 2 message) "[ ,]+" t))
           (best (car (sort (cl-remove-if (lambda (n) (> (string-distance bad n) 2)) names)
                            (lambda (a b) (< (string-distance bad a) (string-distance bad b)))))))
      (when best (format " (did you mean `%s'?)" best)))))

(defun garuda--error-message (err)
  "A sentence for ERR, a jsonrpc error plist or condition."
  (garuda--explain
   (cond ((and (consp err) (keywordp (car err))) (plist-get err :message))
         ((and (consp err) (eq (car err) 'jsonrpc-error))
          (or (alist-get 'jsonrpc-error-message (cdr err)) (format "%s" (cdr err))))
         ((and (consp err) (symbolp (car err))) (error-message-string err))
         (t (format "%s" err)))
   (cond ((and (consp err) (keywordp (car err))) (plist-get err :data))
         ((and (consp err) (eq (car err) 'jsonrpc-error))
          (alist-get 'jsonrpc-error-data (cdr err))))))

(defun garuda--tokens (n)
  "N tokens, short."
  (cond ((not (numberp n)) "?")
        ((>= n 1000) (format "%.1fk" (/ n 1000.0)))
        (t (number-to-string n))))

;;;; Connection

(defclass garuda-connection (jsonrpc-process-connection) ()
  "A connection whose request dispatcher may answer later.")

(cl-defmethod jsonrpc-connection-send :around ((conn garuda-connection) &rest args)
  "Send ARGS on CONN, except replies the dispatcher defers (answered later)."
  (let ((result (plist-get args :result)))
    (if (and (consp result) (eq (car result) 'garuda--deferred))
        (funcall (cdr result) conn (plist-get args :id))
      (cl-call-next-method))))

(defun garuda--defer (fn)
  "A dispatcher result that defers the reply: FN gets the connection and id."
  (cons 'garuda--deferred fn))

(defun garuda--reply (conn id result)
  "Answer request ID on CONN with RESULT."
  (when (and conn (jsonrpc-running-p conn))
    (jsonrpc--reply conn id :result result)))

(defun garuda--live-p ()
  "Non-nil when the server runs."
  (and garuda--connection (jsonrpc-running-p garuda--connection)))

(defun garuda--stderr-buffer (&optional conn)
  "The buffer of CONN's (default: the running server's) stderr, or nil."
  (let* ((conn (or conn garuda--connection))
         (pipe (and conn (process-get (jsonrpc--process conn) 'garuda-stderr))))
    (and pipe (buffer-live-p (process-buffer pipe)) (process-buffer pipe))))

(defun garuda--stderr-tail (&optional conn n)
  "The last N (default 8) lines CONN's server wrote on stderr."
  (let ((buf (garuda--stderr-buffer conn)))
    (when buf
      (with-current-buffer buf
        (let ((lines (split-string (buffer-string) "\n" t)))
          (mapcar (lambda (l) (replace-regexp-in-string "\e\\[[0-9;]*[A-Za-z]" "" l))
                  (last lines (or n 8))))))))

(defun garuda--reap-orphans (marker)
  "Kill the process groups of processes with GARUDA_OWNER=MARKER."
  (when (and marker (file-directory-p "/proc"))
    (let ((needle (concat "GARUDA_OWNER=" marker)) (n 0))
      (dolist (pid (list-system-processes))
        (let ((env (ignore-errors
                     (with-temp-buffer
                       (set-buffer-multibyte nil)
                       (insert-file-contents-literally (format "/proc/%d/environ" pid))
                       (split-string (buffer-string) "\0" t)))))
          (when (member needle env)
            (let ((pgrp (alist-get 'pgrp (process-attributes pid))))
              (when (and pgrp (> pgrp 1) (/= pgrp (emacs-pid)))
                (call-process "kill" nil nil nil "-KILL" "--" (format "-%d" pgrp)))
              (signal-process pid 'kill)
              (cl-incf n)))))
      n)))

(defun garuda--on-shutdown (_conn)
  "The server ended: stop the commands it left, close approvals."
  (setq garuda--workspaces nil)
  (let ((marker garuda--marker))
    (unless garuda--stopping
      (garuda--reap-orphans marker)))
  (dolist (a garuda--approvals) (garuda--close-approval a))
  (setq garuda--approvals nil)
  (garuda--approvals-changed))

(defun garuda--exit-description (proc)
  "How PROC ended, e.g. \"killed by signal 9\" or \"exit code 2\"."
  (if (and proc (eq (process-status proc) 'signal))
      (format "killed by signal %s" (process-exit-status proc))
    (format "exit code %s" (and proc (process-exit-status proc)))))

(defun garuda--stderr-text (pipe)
  "What the server wrote on its stderr PIPE, read to the end, without colors."
  ;; The pipe is read apart from the process: its last lines may still be on the way.
  (with-timeout (2 nil)
    (while (process-live-p pipe) (accept-process-output pipe 0.05)))
  (let ((buf (process-buffer pipe)))
    (when (buffer-live-p buf)
      (with-current-buffer buf
        (string-trim (replace-regexp-in-string "\e\\[[0-9;]*[A-Za-z]" "" (buffer-string)))))))

(defun garuda--start-server (name marker on-shutdown)
  "Start `garuda serve' and run `initialize'; return the connection.
NAME names the connection (its stderr goes to ` *NAME stderr*'), MARKER
is its GARUDA_OWNER, ON-SHUTDOWN runs when it ends.  A server that exits
at once (a bad config.toml) signals a `user-error' in the server's words."
  (unless (executable-find garuda-program)
    (user-error "Garuda: the garuda binary was not found: %S is not an executable on exec-path.  Install it (cargo install --path . in the garuda repository) or set `garuda-program'"
                garuda-program))
  (let* ((process-environment
          (append (list "NO_COLOR=1" (concat "GARUDA_OWNER=" marker))
                  garuda-environment process-environment))
         ;; Our own stderr pipe, to read it to its end when the server dies at once, with a
         ;; silent sentinel (not "Process … finished" in the log).  jsonrpc.el copies the
         ;; lines of the buffer named so into its events log, and hides it.
         (pipe (make-pipe-process :name (format "%s stderr" name)
                                  :buffer (get-buffer-create (format "*%s stderr*" name))
                                  :noquery t :sentinel #'ignore))
         (conn (make-instance
                'garuda-connection
                :name name
                :events-buffer-scrollback-size garuda-events-buffer-size
                :process (lambda ()
                           (make-process
                            :name "garuda"
                            :command (cons garuda-program garuda-program-args)
                            :connection-type 'pipe
                            :coding 'utf-8-emacs-unix
                            :noquery t
                            :stderr pipe))
                :notification-dispatcher #'garuda--notification
                :request-dispatcher #'garuda--request
                :on-shutdown on-shutdown)))
    (process-put (jsonrpc--process conn) 'garuda-stderr pipe)
    (condition-case err
        ;; Kept for `garuda-doctor': the config file's problems are in it.
        (process-put (jsonrpc--process conn) 'garuda-init
                     (jsonrpc-request conn 'initialize
                                      (list :processId (emacs-pid)
                                            :clientInfo (list :name "garuda.el")
                                            :capabilities (garuda--capabilities))
                                      :timeout garuda-request-timeout))
      ;; A jsonrpc-error ("Server died"), or a plain error when it died before the request was written.
      ((jsonrpc-error error)
       (let ((proc (jsonrpc--process conn)))
         (with-timeout (2 nil)
           (while (process-live-p proc) (accept-process-output proc 0.05)))
         (let ((said (garuda--stderr-text pipe)))
           (unless (process-live-p proc) (message nil)) ; jsonrpc's "Server exited", said better below
           (when (process-live-p proc) (jsonrpc-shutdown conn t))
           (user-error "Garuda: the server did not start (%s)%s"
                       (if (process-live-p proc) (garuda--error-message err)
                         (garuda--exit-description proc))
                       (if (string-empty-p (or said "")) "" (concat ":\n" said)))))))
    (jsonrpc-notify conn 'initialized (make-hash-table))
    conn))

(defun garuda--connect ()
  "The running connection; start `garuda serve' and initialize it if needed."
  (unless (garuda--live-p)
    (setq garuda--workspaces nil
          garuda--connection nil
          garuda--marker (format "%d-%d-%d" (emacs-pid) (random 1000000000) (float-time)))
    (setq garuda--connection
          (garuda--start-server "garuda" garuda--marker #'garuda--on-shutdown)))
  garuda--connection)

(defun garuda--call (method params)
  "Send METHOD (a string) with PARAMS and wait for the result.
Errors become `user-error's in plain words."
  (let ((conn (garuda--connect)))
    (condition-case err
        (prog1 (jsonrpc-request conn (intern method) params :timeout garuda-request-timeout)
          (garuda--drain conn))
      (jsonrpc-error
       (user-error "Garuda: %s: %s" method (garuda--error-message err))))))

(defun garuda--drain (conn)
  "Handle messages CONN has already received but not dispatched.
`jsonrpc-request' returns by throwing out of the process filter, which leaves
the rest of that read (e.g. a `turn/run' answer right behind a `turn/cancel'
answer) unparsed until more output comes; run the filter again to parse it."
  (let ((proc (jsonrpc--process conn)))
    (when (and (process-live-p proc) (buffer-live-p (process-buffer proc)))
      (jsonrpc--process-filter proc ""))))

(defun garuda--workspace (root)
  "Open ROOT as a workspace (once) and return its id.
Its warnings (instruction files cut or unreadable, ignored project
settings) go to the echo area and `garuda-doctor'."
  (or (cdr (assoc root garuda--workspaces))
      (let* ((ws (garuda--call "workspace/open" (list :root root)))
             (id (plist-get ws :workspaceId)))
        (push (cons root id) garuda--workspaces)
        (seq-doseq (w (plist-get ws :warnings))
          (garuda--remember-warning w)
          (message "Garuda: %s" w))
        id)))

(defun garuda-shutdown ()
  "Shut the server down cleanly (`shutdown', `exit'), killing it if it lingers."
  (interactive)
  (when garuda--connection
    (let ((conn garuda--connection)
          (proc (jsonrpc--process garuda--connection))
          (garuda--stopping t))
      (setq garuda--connection nil)
      (when (process-live-p proc)
        (ignore-errors
          (jsonrpc-request conn 'shutdown nil :timeout 5)
          (jsonrpc-notify conn 'exit nil))
        (with-timeout (5 nil)
          (while (process-live-p proc) (accept-process-output proc 0.05))))
      (jsonrpc-shutdown conn t)
      (clrhash garuda--buffers))))

;;;; Server to client

(defun garuda--notification (_conn method params)
  "Handle notification METHOD with PARAMS."
  (pcase method
    ('turn/update
     (let* ((sid (plist-get params :sessionId))
            (event (plist-get params :event))
            (agent (plist-get params :agent))
            (buf (gethash sid garuda--buffers)))
       (if agent
           ;; Relayed from an agent (agentEvents): never the session's own text.
           (progn
             (when (buffer-live-p buf)
               (with-current-buffer buf (garuda--show-agent-event agent event)))
             (run-hook-with-args 'garuda-agent-event-functions sid agent event))
         (when (buffer-live-p buf)
           (with-current-buffer buf (garuda--show-event event)))
         (run-hook-with-args 'garuda-event-functions sid event))))
    ('$/cancelRequest
     (let ((a (cl-find (plist-get params :id) garuda--approvals
                       :key (lambda (a) (plist-get a :id)))))
       (when a (garuda--approval-timed-out a))))
    ('workspace/contextChanged
     (message "Garuda: context files changed: %s"
              (mapconcat #'identity (plist-get params :changed) ", ")))
    ;; The config file's problems (and "in force again" once fixed), an MCP server that did
    ;; not start: in the server's words, which already start with "Garuda" when about config.
    ('window/showMessage
     (let ((text (or (plist-get params :message) "")))
       (when (memq (plist-get params :type) '(1 2))
         (garuda--remember-warning text))
       (message "%s" (if (string-prefix-p "Garuda" text) text (concat "Garuda: " text)))))))

(defvar garuda--warnings nil
  "The warnings the chat's server gave, newest first (at most 20).
`garuda-doctor' lists them.")

(defun garuda--remember-warning (text)
  "Keep TEXT, a server warning, for `garuda-doctor' (once)."
  (setq garuda--warnings (seq-take (cons text (delete text garuda--warnings)) 20)))

(defun garuda--problem-text (p)
  "One line for config problem P: file, line and column, key, what was expected."
  (concat (plist-get p :file)
          (if (plist-get p :line)
              (format ": line %s%s" (plist-get p :line)
                      (if (plist-get p :column) (format ", column %s" (plist-get p :column)) ""))
            "")
          (if (plist-get p :key) (format ": `%s'" (plist-get p :key)) "")
          ": " (plist-get p :message)))

(defun garuda--capabilities ()
  "What `initialize' declares.
agentEvents: an explore/agent call's own steps come relayed; codeSymbols (with
`garuda-code-symbols'): symbol queries are asked of eglot first."
  (list :workspace (list :applyEdit t)
        :experimental
        (list :garuda (append (list :agentEvents t)
                              (and garuda-code-symbols (list :codeSymbols t))))))

(defun garuda--request (_conn method params)
  "Answer request METHOD with PARAMS."
  (pcase method
    ('permission/request (garuda--permission params))
    ('workspace/applyEdit
     (condition-case err
         (garuda--apply-workspace-edit params)
       (error (list :applied :json-false :failureReason (error-message-string err)))))
    ('tool/call
     (list :content (format "this client runs no tool %s" (plist-get params :name))
           :isError t))
    ((or 'code/findSymbol 'code/findReferences) (garuda--code-request method params))
    (_ (jsonrpc-error :code -32601 :message (format "unknown method %s" method)))))

;;;; Symbol queries answered from eglot

;; Garuda asks `code/findSymbol' and `code/findReferences' (protocol/README.md) before it
;; consults its own index.  They are answered from the eglot server that manages a buffer of
;; the session's project, asynchronously (the reply is deferred to the server's callback), and
;; with null whenever there is none, it errors or it is slow.  eglot is never loaded here: only
;; a user who runs it gets answers.

(declare-function eglot-current-server "eglot")
(declare-function eglot--capabilities "eglot")

(defconst garuda--symbol-kinds
  ["file" "module" "namespace" "package" "class" "method" "property" "field" "constructor"
   "enum" "interface" "function" "variable" "constant" "string" "number" "boolean" "array"
   "object" "key" "null" "enum_member" "struct" "event" "operator" "type_parameter"]
  "LSP SymbolKind names in lower case; kind N is element N-1.")

(defconst garuda--symbol-default-limit 50 "Items answered when a request names no limit.")
(defconst garuda--symbol-max-limit 500 "The most items ever answered.")
(defconst garuda--symbol-text-max 300 "Longest signature or reference text sent, in characters.")
(defconst garuda--symbol-read-max (* 4 1024 1024)
  "The largest file read or visited for an answer when no buffer has it.")

(defconst garuda--declaration-words
  '("export" "default" "function" "const" "let" "var" "class" "interface" "type" "enum" "async"
    "await" "static" "public" "private" "protected" "readonly" "abstract" "declare" "def" "fn"
    "pub" "mod" "struct" "impl" "trait" "func" "package" "import" "from" "return" "local"
    "extern" "unsafe" "crate" "self" "new")
  "Words a declaration line starts with that are never the symbol asked about.")

(defun garuda--symbol-kind-name (n)
  "The protocol's name of LSP SymbolKind N."
  (if (and (integerp n) (<= 1 n (length garuda--symbol-kinds)))
      (aref garuda--symbol-kinds (1- n))
    "symbol"))

(defun garuda--file-uri-path (uri)
  "The file path of URI when it is a file:// URI, else nil."
  (and (stringp uri) (string-prefix-p "file://" uri) (garuda--uri-path uri)))

(defun garuda--relpath (root path)
  "PATH relative to ROOT when it lies inside it, else nil."
  (let ((r (file-name-as-directory (expand-file-name root)))
        (p (expand-file-name path)))
    (cond ((string-prefix-p r p) (substring p (length r)))
          ((let ((tr (file-name-as-directory (file-truename root)))
                 (tp (file-truename path)))
             (and (string-prefix-p tr tp) (substring tp (length tr))))))))

(defun garuda--match-rank (name query)
  "1 when NAME is QUERY, 2 equal ignoring case, 3 containing it, else nil."
  (cond ((string= name query) 1)
        ((string= (downcase name) (downcase query)) 2)
        ((string-search (downcase query) (downcase name)) 3)))

(defun garuda--rank-symbols (symbols query kind root limit)
  "SYMBOLS (workspace/symbol's answer) as protocol items, without signatures.
Only names matching QUERY, of KIND when non-nil, inside ROOT; best match
first, then by path and line; at most LIMIT.  Each item keeps its absolute
path under :abs until it is sent."
  (let ((i 0) ranked)
    (seq-doseq (s symbols)
      (let* ((loc (plist-get s :location))
             (range (plist-get loc :range))
             (abs (and range (garuda--file-uri-path (plist-get loc :uri))))
             (rel (and abs (garuda--relpath root abs)))
             (name (plist-get s :name))
             (rank (and (stringp name) (garuda--match-rank name query)))
             (k (garuda--symbol-kind-name (plist-get s :kind)))
             (l1 (plist-get (plist-get range :start) :line))
             (l2 (plist-get (plist-get range :end) :line))
             (container (plist-get s :containerName)))
        (when (and rank rel (or (null kind) (equal kind k)))
          (push (list rank (cl-incf i)
                      (append (list :name name :kind k)
                              (and (stringp container) (not (string-empty-p container))
                                   (list :container container))
                              (list :path rel :line (1+ l1))
                              (and l2 (> l2 l1) (list :endLine (1+ l2)))
                              (list :abs abs)))
                ranked))))
    (setq ranked (sort ranked
                       (lambda (a b)
                         (let ((pa (plist-get (nth 2 a) :path)) (pb (plist-get (nth 2 b) :path)))
                           (cond ((/= (car a) (car b)) (< (car a) (car b)))
                                 ((not (string= pa pb)) (string< pa pb))
                                 ((/= (plist-get (nth 2 a) :line) (plist-get (nth 2 b) :line))
                                  (< (plist-get (nth 2 a) :line) (plist-get (nth 2 b) :line)))
                                 (t (< (nth 1 a) (nth 1 b))))))))
    (mapcar (lambda (r) (nth 2 r)) (seq-take ranked limit))))

(defun garuda--reference-items (locations root limit)
  "LOCATIONS (textDocument/references' answer) as protocol items, without text.
Inside ROOT only, one per line, by path and line, at most LIMIT; :abs as in
`garuda--rank-symbols'."
  (let ((seen (make-hash-table :test #'equal)) items)
    (seq-doseq (loc locations)
      (let* ((range (plist-get loc :range))
             (abs (and range (garuda--file-uri-path (plist-get loc :uri))))
             (rel (and abs (garuda--relpath root abs)))
             (line (and range (1+ (plist-get (plist-get range :start) :line)))))
        (when (and rel (not (gethash (cons rel line) seen)))
          (puthash (cons rel line) t seen)
          (push (list :path rel :line line :abs abs) items))))
    (seq-take (sort items (lambda (a b)
                            (let ((pa (plist-get a :path)) (pb (plist-get b :path)))
                              (if (string= pa pb) (< (plist-get a :line) (plist-get b :line))
                                (string< pa pb)))))
              limit)))

(defun garuda--identifier-col (text name)
  "The column of NAME as a whole identifier on TEXT, as (COL . t).
COL counts characters.
Else the column of TEXT's first identifier that is not a declaration word, as
\(COL . nil); nil when TEXT has none."
  (let ((case-fold-search nil))
    (or (and (stringp name) (not (string-empty-p name))
             (string-match (concat "\\(?:^\\|[^[:alnum:]_$]\\)\\(" (regexp-quote name) "\\)\\(?:[^[:alnum:]_$]\\|$\\)")
                           text)
             (cons (match-beginning 1) t))
        (let ((start 0) found)
          (while (and (not found) (string-match "[[:alpha:]_$][[:alnum:]_$]*" text start))
            (if (member (match-string 0 text) garuda--declaration-words)
                (setq start (match-end 0))
              (setq found (cons (match-beginning 0) nil))))
          found))))

(defun garuda--lsp-column (text col encoding)
  "COL (characters into TEXT) as the server counts.
ENCODING is the server's positionEncoding, UTF-16 when it names none."
  (pcase encoding
    ("utf-32" col)
    ("utf-8" (string-bytes (substring text 0 col)))
    (_ (/ (length (encode-coding-string (substring text 0 col) 'utf-16le)) 2))))

(defun garuda--readable-p (abs)
  "Non-nil when ABS is a regular file of at most `garuda--symbol-read-max' bytes.
The only kind read or visited for an answer: never a FIFO that would block
Emacs, nor a huge generated file."
  (let ((attrs (file-attributes (file-truename abs))))
    (and attrs (string-prefix-p "-" (file-attribute-modes attrs))
         (<= (file-attribute-size attrs) garuda--symbol-read-max))))

(defun garuda--file-lines (abs wanted)
  "Lines WANTED (1-based numbers) of ABS, as an alist.
From its buffer when it is visited, else from the file."
  (let ((buf (find-buffer-visiting abs)))
    (with-temp-buffer
      (if buf
          (insert-buffer-substring buf)
        (when (garuda--readable-p abs) (ignore-errors (insert-file-contents abs))))
      (mapcar (lambda (n)
                (goto-char (point-min))
                (cons n (and (= (forward-line (1- n)) 0) (not (eobp))
                             (buffer-substring-no-properties (line-beginning-position) (line-end-position)))))
              wanted))))

(defun garuda--add-text (items field)
  "Set FIELD of each of ITEMS to its line's text, trimmed; drop :abs.
Return the items."
  (let ((by-file (make-hash-table :test #'equal)))
    (dolist (it items)
      (push (plist-get it :line) (gethash (plist-get it :abs) by-file)))
    (maphash (lambda (abs lines) (puthash abs (garuda--file-lines abs lines) by-file)) by-file)
    (mapcar (lambda (it)
              (let* ((l (cdr (assq (plist-get it :line) (gethash (plist-get it :abs) by-file))))
                     (l (and l (string-trim l)))
                     (out (cl-loop for (k v) on it by #'cddr unless (eq k :abs) append (list k v))))
                (if (and l (not (string-empty-p l)))
                    (append out (list field (truncate-string-to-width l garuda--symbol-text-max)))
                  out)))
            items)))

(defun garuda--eglot-servers (root capability)
  "Running eglot servers that manage a buffer inside ROOT and have CAPABILITY."
  (when (featurep 'eglot)
    (let (out)
      (dolist (b (buffer-list))
        (let ((f (buffer-file-name b)))
          (when (and f (garuda--relpath root f))
            (let ((s (with-current-buffer b (ignore-errors (eglot-current-server)))))
              (when (and s (not (memq s out)) (jsonrpc-running-p s)
                         (plist-get (eglot--capabilities s) capability))
                (push s out))))))
      (nreverse out))))

(defun garuda--eglot-source (server)
  "The name of SERVER's program, as the answer's source."
  (let ((cmd (ignore-errors (process-command (jsonrpc--process server)))))
    (if cmd (file-name-nondirectory (car cmd)) (jsonrpc-name server))))

(defun garuda--eglot-buffer (server abs)
  "A buffer of ABS managed by SERVER (visited when it was not), or nil.
Servers such as tsserver answer references only for files they have open."
  (let ((buf (or (find-buffer-visiting abs)
                 (and (garuda--readable-p abs) (ignore-errors (find-file-noselect abs t))))))
    (and buf (eq (with-current-buffer buf (ignore-errors (eglot-current-server))) server) buf)))

(defun garuda--code-limit (params method)
  "PARAMS' limit for METHOD, bounded; the default when it names none.
Signals invalid params when it is not a positive number."
  (let ((l (plist-get params :limit)))
    (cond ((null l) garuda--symbol-default-limit)
          ((and (numberp l) (>= l 1)) (min (floor l) garuda--symbol-max-limit))
          (t (garuda--invalid-params "%s: `limit' must be a positive number" method)))))

(defun garuda--invalid-params (fmt &rest args)
  "Signal a JSON-RPC invalid params error of message FMT with ARGS."
  (jsonrpc-error :code -32602 :message (apply #'format fmt args)))

(defun garuda--code-ask (server method params then)
  "Send METHOD with PARAMS to SERVER; call THEN with the result.
THEN gets nil when the server errors or does not answer in time."
  (jsonrpc-async-request server method params
                         :success-fn then
                         :error-fn (lambda (_) (funcall then nil))
                         :timeout-fn (lambda () (funcall then nil))
                         :timeout garuda-code-symbols-timeout))

(defun garuda--code-check (method params root)
  "Signal invalid params when PARAMS of METHOD are malformed for ROOT."
  (let ((name (plist-get params :name))
        (path (plist-get params :path))
        (line (plist-get params :line)))
    (if (eq method 'code/findSymbol)
        (progn
          (unless (and (stringp name) (not (string-empty-p name)))
            (garuda--invalid-params "code/findSymbol: `name' must be a non-empty string"))
          (when (and (plist-get params :kind) (not (stringp (plist-get params :kind))))
            (garuda--invalid-params "code/findSymbol: `kind' must be a string")))
      (when (and name (not (and (stringp name) (not (string-empty-p name)))))
        (garuda--invalid-params "%s: `name' must be a non-empty string" method))
      (unless (eq (null path) (null line))
        (garuda--invalid-params "%s: `path' and `line' go together" method))
      (when (and path (not (and (stringp path) (integerp line) (>= line 1))))
        (garuda--invalid-params "%s: `path' must be a string and `line' a 1-based number" method))
      (unless (or path name)
        (garuda--invalid-params "%s: give `name', or `path' and `line'" method))
      (when (and path (not (garuda--relpath root (expand-file-name path root))))
        (garuda--invalid-params "%s: `path' is outside the workspace: %s" method path)))
    (garuda--code-limit params method)))

(defun garuda--code-find-symbol (params root reply)
  "Answer `code/findSymbol' PARAMS for ROOT by calling REPLY, asynchronously."
  (let ((name (plist-get params :name))
        (kind (plist-get params :kind)))
    (let ((limit (garuda--code-check 'code/findSymbol params root))
          (servers (garuda--eglot-servers root :workspaceSymbolProvider)))
      (cl-labels ((try (rest)
                    (if (null rest)
                        (funcall reply nil)
                      (garuda--code-ask
                       (car rest) :workspace/symbol (list :query name)
                       (lambda (result)
                         (let ((items (garuda--rank-symbols result name kind root limit)))
                           (if items
                               (funcall reply (list :source (garuda--eglot-source (car rest))
                                                    :items (vconcat (garuda--add-text items :signature))))
                             (try (cdr rest)))))))))
        (try servers)))))

(defun garuda--code-find-references (params root reply)
  "Answer `code/findReferences' PARAMS for ROOT by calling REPLY, later.
The position is the identifier `name' on the line of `path'+`line' (else the
line's first), or the definition workspace/symbol finds for a bare `name'."
  (let* ((limit (garuda--code-check 'code/findReferences params root))
         (name (plist-get params :name))
         (path (plist-get params :path))
         (line (plist-get params :line))
         (abs (and path (expand-file-name path root))))
    (let ((servers (garuda--eglot-servers root :referencesProvider)))
      (cl-labels
          ((try (rest)
             (let ((s (car rest)))
               (cond ((null rest) (funcall reply nil))
                     (abs (refs rest abs line 0))
                     ((not (plist-get (eglot--capabilities s) :workspaceSymbolProvider)) (try (cdr rest)))
                     (t (garuda--code-ask
                         s :workspace/symbol (list :query name)
                         (lambda (result)
                           (let ((best (car (garuda--rank-symbols result name nil root 1))))
                             (if best
                                 (refs rest (plist-get best :abs) (plist-get best :line)
                                       (- (or (plist-get best :endLine) (plist-get best :line))
                                          (plist-get best :line)))
                               (try (cdr rest))))))))))
           ;; SPAN: further lines the name may be on (a decorator or a comment may start the
           ;; definition workspace/symbol found); the first line's first identifier is the fallback.
           (refs (rest file lnum span)
             (let* ((s (car rest))
                    (buf (garuda--eglot-buffer s file))
                    (lines (and buf (garuda--file-lines file (number-sequence lnum (+ lnum (min span 20))))))
                    (at (or (cl-loop for (n . text) in lines
                                     for hit = (and text (garuda--identifier-col text name))
                                     when (cdr hit) return (list n text (car hit)))
                            (let* ((text (cdr (assq lnum lines)))
                                   (hit (and text (garuda--identifier-col text name))))
                              (and hit (list lnum text (car hit)))))))
               (if (not at)
                   (try (cdr rest))
                 (garuda--code-ask
                  s :textDocument/references
                  (list :textDocument (list :uri (concat "file://" (url-hexify-string file (cons ?/ url-unreserved-chars))))
                        :position (list :line (1- (nth 0 at))
                                        :character (garuda--lsp-column
                                                    (nth 1 at) (nth 2 at)
                                                    (plist-get (eglot--capabilities s) :positionEncoding)))
                        :context (list :includeDeclaration :json-false))
                  (lambda (result)
                    (let ((items (garuda--reference-items result root limit)))
                      (if items
                          (funcall reply (list :source (garuda--eglot-source s)
                                               :items (vconcat (garuda--add-text items :text))))
                        (try (cdr rest))))))))))
        (try servers)))))

(defun garuda--code-request (method params)
  "The dispatcher's answer to symbol query METHOD with PARAMS (deferred)."
  (let* ((chat (garuda--chat-of (plist-get params :sessionId)))
         (root (and chat (buffer-local-value 'garuda--root chat)))
         (fn (if (eq method 'code/findSymbol) #'garuda--code-find-symbol #'garuda--code-find-references)))
    (cond ((not root) nil)              ; a session of no chat here: Garuda uses its own index
          ((progn (garuda--code-check method params root) nil))
          (t (garuda--defer
              (lambda (conn id)
                (condition-case nil
                    (funcall fn params root (lambda (result) (garuda--reply conn id result)))
                  (error (garuda--reply conn id nil)))))))))

;;;; Approvals

(defconst garuda--option-letters '(("allow_once" . "y") ("allow_always" . "a") ("reject" . "n"))
  "The keys of the optionIds garuda.el knows; any other is chosen by its number.")

(defun garuda--choices (options)
  "The choices of a request's OPTIONS (a vector or list of plists).
Each is a plist (:id :name :key :num), in the server's order; :key is
the letter of a known optionId, else the number.  Without any option (a
malformed request) the only choice is Reject: declining is always safe."
  (let ((out nil) (n 0))
    (dolist (o (append options nil))
      (let ((id (and (listp o) (plist-get o :optionId)))
            (name (and (listp o) (plist-get o :name))))
        (when (and (stringp id) (> (length id) 0))
          (cl-incf n)
          (push (list :id id :name (if (and (stringp name) (> (length name) 0)) name id) :num n
                      :key (or (cdr (assoc id garuda--option-letters)) (number-to-string n)))
                out))))
    (or (nreverse out) (list (list :id "reject" :name "Reject" :num 1 :key "n")))))

(defun garuda--offered (params id)
  "The choice with optionId ID that request PARAMS offers, or nil."
  (cl-find id (garuda--choices (plist-get params :options))
           :key (lambda (c) (plist-get c :id)) :test #'equal))

(defun garuda--plan-of (params)
  "The plan request PARAMS asks to approve (its :plan, or the plan of an
`exit_plan_mode' call), or nil for any other request."
  (let ((plan (plist-get params :plan)))
    (if (stringp plan) plan
      (garuda--plan-text (plist-get params :toolName) (plist-get params :input)))))

(defun garuda--choices-hint (params)
  "One line naming the keys that answer request PARAMS."
  (let ((choices (garuda--choices (plist-get params :options))))
    (concat (mapconcat (lambda (c) (format "%s %s" (plist-get c :key) (plist-get c :name))) choices ", ")
            (if (cl-some (lambda (c) (assoc (plist-get c :id) garuda--option-letters)) choices)
                " (or its number)"
              "")
            (if (and (garuda--plan-of params) (garuda--offered params "reject"))
                ", f No, and tell the model what to change"
              ""))))

(defun garuda-approve-with-y-or-n-p (params)
  "Answer the call in PARAMS with `y-or-n-p' (allow once or reject).
A request that does not offer both is asked with `completing-read'
over its options' names instead."
  (if (and (garuda--offered params "allow_once") (garuda--offered params "reject"))
      (if (y-or-n-p (format "Garuda: allow %s? " (plist-get params :title)))
          "allow_once"
        "reject")
    (let* ((choices (garuda--choices (plist-get params :options)))
           (pick (completing-read (format "Garuda: %s: " (plist-get params :title))
                                  (mapcar (lambda (c) (plist-get c :name)) choices) nil t)))
      (plist-get (cl-find pick choices :key (lambda (c) (plist-get c :name)) :test #'equal) :id))))

(defun garuda-approve-with-buffer (_params)
  "Marker for the default approval UI (a buffer with y/a/n keys).
`garuda-approve' moves to that buffer."
  nil)

(defun garuda--chat-of (sid)
  "The chat buffer of session SID, or nil."
  (let ((b (gethash sid garuda--buffers))) (and (buffer-live-p b) b)))

(defun garuda--note (buf text &optional face)
  "Insert TEXT as a note line in chat BUF."
  (when (buffer-live-p buf)
    (with-current-buffer buf
      (garuda--insert (concat "\n" text) (or face 'garuda-note-face)))))

(defvar garuda--read-only)

(defun garuda--note-answer (a text)
  "Say TEXT, the answer to approval A, in its chat: in place of its
\"approval waiting\" line, which would otherwise stay after the answer."
  (let ((chat (plist-get a :chat)) (id (plist-get a :id)))
    (when (buffer-live-p chat)
      (with-current-buffer chat
        (let ((start (and id (text-property-any (point-min) (point-max) 'garuda-waiting id))))
          (if (not start)
              (garuda--note chat text)
            (let* ((end (or (next-single-property-change start 'garuda-waiting) (point-max)))
                   (last (= end garuda--output-marker))
                   (inhibit-read-only t))
              (save-excursion
                (goto-char start)
                ;; The line's own text, after its newline; what was added below stays.
                (when (eq (char-after) ?\n) (forward-char))
                (delete-region (point) end)
                (insert (apply #'propertize (string-trim-left text "\n")
                               'face 'garuda-note-face garuda--read-only))
                (when last (set-marker garuda--output-marker (point)))))))))))

(defun garuda--permission (params)
  "Handle a permission request PARAMS: answered later, on purpose."
  (let* ((sid (plist-get params :sessionId))
         (tool (plist-get params :toolName))
         (chat (garuda--chat-of sid)))
    ;; "Always" remembered here covers only a request that could be answered so: one
    ;; offering allow_always (a command leaving the sandbox never does).
    (if (and chat (member tool (buffer-local-value 'garuda--always chat))
             (garuda--offered params "allow_always") (garuda--offered params "allow_once"))
        (progn
          (garuda--note chat (format "  approval: allowed (%s is always allowed in this session; M-x garuda-permissions revokes)" tool))
          (list :optionId "allow_once"))
      (garuda--defer
       (lambda (conn id)
         (let ((a (list :id id :conn conn :params params :chat chat :start (float-time))))
           (setq garuda--approvals (append garuda--approvals (list a)))
           (when (buffer-live-p chat)
             (with-current-buffer chat
               (garuda--insert (concat "\n" (format "  ⚠ approval waiting: %s · C-c C-a (M-x garuda-approve) to answer"
                                                    (plist-get params :title)))
                               'warning (list 'garuda-waiting id))))
           (when (eq (car garuda--approvals) a) (garuda--show-approval a))
           (garuda--approvals-changed)))))))

(defvar garuda-approval-waiting-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "C-c C-a") #'garuda-approve)
    map)
  "Keys of `garuda-approval-waiting-mode': C-c C-a goes to the approval.")

(define-minor-mode garuda-approval-waiting-mode
  "On while a Garuda approval waits: the mode line says so, C-c C-a answers.
It is turned on and off by garuda.el itself."
  :global t
  :lighter (:propertize " [Garuda approval: C-c C-a]" face warning)
  :keymap garuda-approval-waiting-mode-map)

(defun garuda--approvals-changed ()
  "Show in every mode line and chat header whether an approval waits."
  (garuda-approval-waiting-mode (if garuda--approvals 1 -1))
  (force-mode-line-update t)
  (when garuda--approvals
    (message "Garuda: approval waiting (%s): C-c C-a to answer"
             (plist-get (plist-get (car garuda--approvals) :params) :title))))

(defun garuda--proposed-change (params root)
  "(PATH OLD NEW) an edit_file or write_file call in PARAMS proposes in ROOT."
  (let* ((tool (plist-get params :toolName))
         (input (plist-get params :input))
         (rel (plist-get input :path))
         (path (and (stringp rel) (expand-file-name rel root)))
         (buf (and path (find-buffer-visiting path)))
         (old (cond ((buffer-live-p buf)
                     (with-current-buffer buf (buffer-substring-no-properties (point-min) (point-max))))
                    ((and path (file-readable-p path))
                     (with-temp-buffer (insert-file-contents path) (buffer-string))))))
    (when path
      (list path old
            (pcase tool
              ("write_file" (plist-get input :content))
              ("edit_file"
               (let ((o (plist-get input :old_string)) (n (or (plist-get input :new_string) "")))
                 (when (and old (stringp o) (> (length o) 0) (string-search o old))
                   (if (eq (plist-get input :replace_all) t)
                       (string-replace o n old)
                     (let ((i (string-search o old)))
                       (concat (substring old 0 i) n (substring old (+ i (length o))))))))))))))

(defun garuda--diff-text (path old new)
  "A unified diff of PATH from OLD to NEW (strings)."
  (let ((a (make-temp-file "garuda-old")) (b (make-temp-file "garuda-new")))
    (unwind-protect
        (progn
          (with-temp-file a (insert (or old "")))
          (with-temp-file b (insert new))
          (with-temp-buffer
            (call-process "diff" nil t nil "-u" "--label" (concat "a/" (file-relative-name path))
                          "--label" (concat "b/" (file-relative-name path)) a b)
            (buffer-string)))
      (delete-file a) (delete-file b))))

(defvar garuda-approval-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "y") #'garuda-approval-allow-once)
    (define-key map (kbd "a") #'garuda-approval-allow-always)
    (define-key map (kbd "n") #'garuda-approval-reject)
    (define-key map (kbd "q") #'garuda-approval-reject)
    (dotimes (i 9)
      (define-key map (number-to-string (1+ i)) #'garuda-approval-pick-number))
    (define-key map (kbd "s") #'garuda-approval-save-first)
    (define-key map (kbd "f") #'garuda-approval-reject-with-words)
    (define-key map (kbd "RET") #'garuda-approval-hint)
    (define-key map (kbd "SPC") #'garuda-approval-hint)
    map)
  "Keymap of `garuda-approval-mode'.")

(define-derived-mode garuda-approval-mode special-mode "Garuda-Approve"
  "A tool call waiting for approval, with the options its request offers.
y allow once, a allow always, n reject (each when offered), a digit the
option of that number; s saves the file's buffer first when it has
unsaved changes (and allow once is offered); f rejects a plan with
words for the model (what should change).
RET does nothing: a bare Enter never approves.")

(defun garuda--fontify-diff (text)
  "TEXT (a unified diff) with diff faces."
  (mapconcat (lambda (l)
               (propertize l 'face (cond ((string-prefix-p "+++" l) 'diff-file-header)
                                         ((string-prefix-p "---" l) 'diff-file-header)
                                         ((string-prefix-p "@@" l) 'diff-hunk-header)
                                         ((string-prefix-p "+" l) 'diff-added)
                                         ((string-prefix-p "-" l) 'diff-removed)
                                         (t 'default))))
             (split-string text "\n") "\n"))

(defun garuda--unsaved-buffer (params root)
  "The buffer with unsaved changes the edit in PARAMS would touch, or nil."
  (let* ((rel (plist-get (plist-get params :input) :path))
         (buf (and root (stringp rel)
                   (member (plist-get params :toolName) '("edit_file" "write_file"))
                   (find-buffer-visiting (expand-file-name rel root)))))
    (and buf (buffer-modified-p buf) buf)))

(defconst garuda--format-chars-re
  "[\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff\u2028\u2029]"
  "Unicode format characters.
Bidi overrides and isolates, zero-width characters, the byte-order
mark, line and paragraph separators.")

(defun garuda--escape-format-chars (s)
  "S with every Unicode format character shown as \\u{202e}.
As the server shows them in titles: what a person approves then reads
as what runs."
  (replace-regexp-in-string garuda--format-chars-re
                            (lambda (m) (format "\\u{%x}" (string-to-char m)))
                            s t t))

(defun garuda--escape-format-chars-in-buffer ()
  "Show every Unicode format character of the buffer as \\u{202e}.
Text properties around them stay."
  (save-excursion
    (goto-char (point-min))
    (while (re-search-forward garuda--format-chars-re nil t)
      (let ((c (char-before)))
        (replace-match (format "\\u{%x}" c) t t)))))

(defun garuda--show-approval (a)
  "Show approval A in `*garuda approval*', in a window that does not take focus."
  (let* ((params (plist-get a :params))
         (tool (plist-get params :toolName))
         (root (and (plist-get a :chat) (buffer-local-value 'garuda--root (plist-get a :chat))))
         (change (and root (member tool '("edit_file" "write_file"))
                      (garuda--proposed-change params root)))
         (unsaved (garuda--unsaved-buffer params root))
         (plan (garuda--plan-of params))
         (buf (get-buffer-create "*garuda approval*")))
    (with-current-buffer buf
      (let ((inhibit-read-only t) (default-directory (or root default-directory)))
        (erase-buffer)
        (garuda-approval-mode)
        (insert (format (if plan "Garuda asks: %s\n\n" "Garuda wants to run %s\n\n")
                        (plist-get params :title)))
        (when unsaved
          (insert (propertize
                   (format "⚠ %s has unsaved changes in Emacs.  Allowed as it is, the edit is refused
  (your unsaved text is never overwritten).  s saves the buffer first: the model is then told
  the file changed and reads it again.  The diff below is of the buffer's text.\n\n"
                           (buffer-name unsaved))
                   'face 'warning)))
        ;; A plan comes after the options, so they are in sight however long it is.
        (unless plan
          (cond
           ((and change (nth 2 change))
            (insert (garuda--fontify-diff
                     (garuda--diff-text (nth 0 change) (nth 1 change) (nth 2 change)))))
           ((equal tool "bash")
            (insert "$ " (or (plist-get (plist-get params :input) :command) "") "\n"))
           (t (insert (json-encode (plist-get params :input)) "\n")))
          (insert "\n"))
        (when (and unsaved (garuda--offered params "allow_once"))
          (insert "  s save the buffer first, then allow once\n"))
        (let ((choices (garuda--choices (plist-get params :options))))
          (dolist (c choices)
            (insert (format "  %s %s\n" (plist-get c :key) (plist-get c :name))))
          (when (and plan (garuda--offered params "reject"))
            (insert "  f No, and tell the model what to change (you type it)\n"))
          (insert (format "  (a digit 1-%d picks that option; RET does nothing)\n" (length choices))))
        (when plan
          (let ((n (length (split-string (string-trim plan) "\n"))))
            (insert (propertize (format "\n── the plan, %d line%s (C-v / M-v scroll it; it is in the chat too) ──\n\n"
                                        n (if (= n 1) "" "s"))
                                'face 'garuda-note-face)
                    (string-trim plan) "\n")))
        ;; The diff and the command are built here from the call's raw input.
        (garuda--escape-format-chars-in-buffer)
        (goto-char (point-min))))
    (setq a (plist-put a :buffer buf))
    ;; Shown, never selected: keys typed in the user's buffer stay there.
    (let ((win (display-buffer buf '((display-buffer-reuse-window
                                      display-buffer-below-selected
                                      display-buffer-pop-up-window)
                                     (inhibit-same-window . t)))))
      (when (window-live-p win) (set-window-point win 1)))
    buf))

(defun garuda--close-approval (a)
  "Close the buffer of approval A."
  (let ((buf (plist-get a :buffer)))
    (when (buffer-live-p buf)
      (dolist (w (get-buffer-window-list buf nil t))
        (ignore-errors (quit-window t w)))
      (when (buffer-live-p buf) (kill-buffer buf)))))

(defun garuda--next-approval ()
  "Go back where `garuda-approve' came from; show the next approval, if any."
  (when (and garuda--approval-return (window-live-p garuda--approval-return))
    (select-window garuda--approval-return))
  (setq garuda--approval-return nil)
  (when garuda--approvals (garuda--show-approval (car garuda--approvals)))
  (garuda--approvals-changed))

(defun garuda--answer (a choice &optional words note)
  "Answer approval A with CHOICE, an optionId its request offers.
Another CHOICE answers nothing: the approval keeps waiting, and a
message names the offered keys.  WORDS, with a rejection, go to the
model as the answer's feedback.  NOTE, when given, is the chat's line
for an allow once.  Returns non-nil when answered."
  (let* ((params (plist-get a :params))
         (offered (garuda--offered params choice)))
    (if (not offered)
        (progn
          (message "Garuda: this request does not offer %s; %s"
                   (pcase choice ("allow_once" "allow once") ("allow_always" "allow always")
                          ("reject" "reject") (_ (format "%s" choice)))
                   (garuda--choices-hint params))
          nil)
      (setq garuda--approvals (delq a garuda--approvals))
      (garuda--close-approval a)
      (let ((chat (plist-get a :chat))
            (tool (plist-get params :toolName)))
        (pcase choice
          ((and "allow_always" (guard (garuda--offered params "allow_once")))
           (when chat
             (with-current-buffer chat (cl-pushnew tool garuda--always :test #'equal))
             (garuda--update-header chat))
           (garuda--note-answer a (format "  approval: allowed; %s is now always allowed in this session (M-x garuda-permissions revokes)" tool))
           ;; Remembered here, so it stays revocable.
           (setq choice "allow_once"))
          ("allow_always" (garuda--note-answer a "  approval: allowed always (the server remembers it)"))
          ("allow_once" (garuda--note-answer a (or note "  approval: allowed once")))
          ((and "reject" (guard words))
           (garuda--note-answer a (format "  approval: rejected; told the model: %s"
                                          (replace-regexp-in-string "\n" " ⏎ " words))))
          ("reject" (garuda--note-answer a "  approval: rejected"))
          (_ (garuda--note-answer a (format "  approval: %s (%s)" (plist-get offered :name) choice))))
        (garuda--reply (plist-get a :conn) (plist-get a :id)
                       (if (and words (equal choice "reject"))
                           (list :optionId choice :feedback words)
                         (list :optionId choice))))
      (garuda--next-approval)
      t)))

(defun garuda--approval-timed-out (a)
  "The server withdrew approval A (its timeout)."
  (setq garuda--approvals (delq a garuda--approvals))
  (garuda--close-approval a)
  (let ((secs (round (- (float-time) (plist-get a :start))))
        (chat (plist-get a :chat)))
    (when chat
      (with-current-buffer chat
        (push (cons (plist-get (plist-get a :params) :toolCallId) secs) garuda--timed-out)))
    (garuda--note-answer a (format "  approval: timed out after %d s without an answer; the call was not run" secs))
    (message "Garuda: approval timed out: %s" (plist-get (plist-get a :params) :title)))
  (garuda--next-approval))

(defun garuda--current-approval ()
  "The approval on screen."
  (or (car garuda--approvals) (user-error "No Garuda approval is waiting")))

(defun garuda-approve ()
  "Go to the waiting approval; there the keys of the offered options answer.
An approval never takes the keyboard by itself, so keys typed in another
buffer never answer it.  With a `garuda-approve-function' other than
the buffer, that function is asked now."
  (interactive)
  (let ((a (garuda--current-approval)))
    (if (not (eq garuda-approve-function #'garuda-approve-with-buffer))
        (let ((choice (ignore-errors (funcall garuda-approve-function (plist-get a :params)))))
          ;; No answer declines, when the request offers a way to.
          (garuda--answer a (or choice "reject")))
      (let ((buf (plist-get a :buffer)))
        (unless (buffer-live-p buf) (setq buf (garuda--show-approval a)))
        (unless (eq (window-buffer) buf)
          (setq garuda--approval-return (selected-window)))
        (select-window (or (get-buffer-window buf) (display-buffer buf)))
        (goto-char (point-min))
        (message "Garuda: %s" (garuda--choices-hint (plist-get a :params)))))))

(defun garuda-approval-allow-once ()
  "Allow this tool call once."
  (interactive)
  (garuda--answer (garuda--current-approval) "allow_once"))

(defun garuda-approval-allow-always ()
  "Allow this call and every later call of this tool in the session."
  (interactive)
  (garuda--answer (garuda--current-approval) "allow_always"))

(defun garuda-approval-reject ()
  "Reject this tool call."
  (interactive)
  (garuda--answer (garuda--current-approval) "reject"))

(defun garuda-approval-reject-with-words (&optional words)
  "Reject the plan on screen, telling the model WORDS (asked for).
Empty words send nothing: the approval keeps waiting."
  (interactive)
  (let ((a (garuda--current-approval)))
    (if (not (and (garuda--plan-of (plist-get a :params)) (garuda--offered (plist-get a :params) "reject")))
        (message "Garuda: f rejects a plan with your words; %s" (garuda--choices-hint (plist-get a :params)))
      (let ((w (string-trim (or words (read-string "What should change in the plan? ")))))
        (if (string-empty-p w)
            (message "Garuda: nothing was sent; the plan still waits")
          (garuda--answer a "reject" w))))))

(defun garuda-approval-pick-number (&optional n)
  "Answer with option N of the request (by default the digit typed)."
  (interactive)
  (let* ((a (garuda--current-approval))
         (n (or n (- last-command-event ?0)))
         (c (nth (1- n) (garuda--choices (plist-get (plist-get a :params) :options)))))
    (if c
        (garuda--answer a (plist-get c :id))
      (message "Garuda: this request does not offer an option %d; %s" n
               (garuda--choices-hint (plist-get a :params))))))

(defun garuda-approval-save-first ()
  "Save the buffer the proposed edit would change, then show the approval again."
  (interactive)
  (let* ((a (garuda--current-approval))
         (chat (plist-get a :chat))
         (buf (garuda--unsaved-buffer (plist-get a :params)
                                      (and chat (buffer-local-value 'garuda--root chat)))))
    (cond
     ((not (garuda--offered (plist-get a :params) "allow_once"))
      (message "Garuda: this request does not offer allow once; %s" (garuda--choices-hint (plist-get a :params))))
     ((not buf)
      (message "Garuda: nothing to save"))
     (t
      ;; Answered here: showing the approval again from its own window would split it.
      (condition-case err
          (progn
            (with-current-buffer buf (save-buffer))
            (garuda--answer a "allow_once" nil
                            (format "  approval: saved %s, then allowed once" (buffer-name buf))))
        (error (message "Garuda: could not save %s: %s; the approval still waits"
                        (buffer-name buf) (error-message-string err))))))))

(defun garuda-approval-hint ()
  "Say which keys answer (RET never approves)."
  (interactive)
  (message "Garuda: press %s; RET does not answer"
           (garuda--choices-hint (plist-get (garuda--current-approval) :params))))

(defun garuda-permissions ()
  "Show the tools allowed always in this chat's session and revoke one or all."
  (interactive)
  (let* ((chat (garuda--chat-buffer-for-command))
         (tools (buffer-local-value 'garuda--always chat)))
    (if (null tools)
        (message "Garuda: no tool is always allowed in this session")
      (let ((pick (completing-read "Revoke \"allow always\" for: " (cons "(all)" tools) nil t)))
        (with-current-buffer chat
          (setq garuda--always (if (equal pick "(all)") nil (delete pick garuda--always)))
          (garuda--insert (format "\n🔒 revoked \"allow always\": %s\n" pick) 'garuda-note-face)
          (garuda--update-header chat))
        pick))))

;;;; Edits through buffers

(defun garuda--uri-path (uri)
  "The file name of a file:// URI."
  (if (string-prefix-p "file://" uri)
      (decode-coding-string (url-unhex-string (substring uri 7)) 'utf-8)
    uri))

(defun garuda--lsp-point (pos)
  "Buffer position of LSP position POS (UTF-16 columns)."
  (save-excursion
    (goto-char (point-min))
    (forward-line (plist-get pos :line))
    (let ((units (plist-get pos :character)))
      (while (and (> units 0) (not (eolp)))
        (setq units (- units (if (> (char-after) #xFFFF) 2 1)))
        (forward-char 1)))
    (point)))

(defun garuda--apply-workspace-edit (params)
  "Apply the LSP WorkspaceEdit in PARAMS to buffers; answer the result."
  (let* ((edit (plist-get params :edit))
         (changes (plist-get edit :changes))
         (files nil))
    (while changes
      (push (cons (garuda--uri-path (substring (symbol-name (car changes)) 1)) (cadr changes)) files)
      (setq changes (cddr changes)))
    (seq-doseq (dc (plist-get edit :documentChanges))
      (push (cons (garuda--uri-path (plist-get (plist-get dc :textDocument) :uri))
                  (plist-get dc :edits))
            files))
    (or
     ;; Refuse before changing anything: unsaved changes would be lost.
     (cl-loop for (path . _) in files
              for b = (find-buffer-visiting path)
              when (and b (buffer-modified-p b))
              return (list :applied :json-false
                           :failureReason (format "%s has unsaved changes in Emacs; save or revert it first"
                                                  (file-name-nondirectory path))))
     (progn
       (dolist (f files)
         (let ((buf (or (find-buffer-visiting (car f)) (find-file-noselect (car f)))))
           (with-current-buffer buf
             (let* ((edits (sort (append (cdr f) nil)
                                 (lambda (x y)
                                   (> (garuda--lsp-point (plist-get (plist-get x :range) :start))
                                      (garuda--lsp-point (plist-get (plist-get y :range) :start))))))
                    (new (let ((text (buffer-substring-no-properties (point-min) (point-max))))
                           (with-temp-buffer
                             (insert text)
                             (dolist (e edits)
                               (let* ((r (plist-get e :range))
                                      (beg (garuda--lsp-point (plist-get r :start)))
                                      (end (garuda--lsp-point (plist-get r :end))))
                                 (delete-region beg end)
                                 (goto-char beg)
                                 (insert (plist-get e :newText))))
                             (buffer-string))))
                    (group (prepare-change-group)))
               (undo-boundary)
               (activate-change-group group)
               (unwind-protect
                   (let ((tmp (generate-new-buffer " *garuda-edit*")))
                     (unwind-protect
                         (progn
                           (with-current-buffer tmp (insert new))
                           (let ((inhibit-read-only t))
                             (replace-buffer-contents tmp)))
                       (kill-buffer tmp)))
                 (accept-change-group group)
                 (undo-amalgamate-change-group group))
               (undo-boundary)
               (let ((before-save-hook nil) (after-save-hook nil))
                 (save-buffer))))))
       (list :applied t)))))

;;;; Chat buffer

(defvar garuda-chat-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "RET") #'garuda-send-input)
    (define-key map (kbd "C-j") #'newline)
    (define-key map (kbd "TAB") #'garuda-toggle-section)
    (define-key map (kbd "C-c C-c") #'garuda-cancel)
    (define-key map (kbd "C-c C-n") #'garuda-new-chat)
    (define-key map (kbd "C-c C-k") #'garuda-compact)
    (define-key map (kbd "C-c C-i") #'garuda-context)
    (define-key map (kbd "C-c C-s") #'garuda-sessions)
    (define-key map (kbd "C-c C-p") #'garuda-permissions)
    (define-key map (kbd "C-c C-a") #'garuda-approve)
    (define-key map [remap self-insert-command] #'garuda-self-insert)
    map)
  "Keymap of `garuda-chat-mode'.")

(define-derived-mode garuda-chat-mode text-mode "Garuda"
  "Chat with Garuda.  Type after the prompt; RET sends, C-j is a newline.
TAB on a tool or thinking line shows or hides its text.  C-c C-a answers
a waiting approval."
  ;; Output goes before the prompt, the input after it: the prompt is always there.
  (setq-local garuda--output-marker (copy-marker (point-max)))
  (setq-local garuda--input-marker (copy-marker (point-max)))
  (add-to-invisibility-spec '(garuda . t))
  (setq header-line-format '(:eval (garuda--header-line)))
  (garuda--draw-prompt))

(defun garuda--header-line ()
  "The chat's header line: model, context use, activity, always-allowed tools.
It is a mode line construct, so a % in it is doubled."
  (string-replace
   "%" "%%"
   (concat
    (format " Garuda · %s" (or garuda--model garuda-model "model from config.toml"))
    (when garuda--window
      (format " · %s/%s (%d%%)" (garuda--tokens (or garuda--context-tokens 0))
              (garuda--tokens garuda--window)
              (round (* 100.0 (/ (float (or garuda--context-tokens 0)) garuda--window)))))
    ;; Only once the provider reported a cache read: a local server without one shows nothing.
    (when (and (numberp garuda--cache-ratio) (> garuda--cache-ratio 0))
      (format " · cache %d%%" (round (* 100 garuda--cache-ratio))))
    (when garuda--running (format " · %s%s" (or garuda--activity "running")
                                  (if garuda--agent-step (format " ↳ %s" garuda--agent-step) "")))
    (when garuda--approvals " · approval waiting (C-c C-a)")
    (when garuda--queue (format " · %d queued" (length garuda--queue)))
    (when garuda--always (format " · always: %s" (string-join garuda--always ","))))))

(defun garuda--update-header (buf)
  "Redraw BUF's header line."
  (when (buffer-live-p buf)
    (with-current-buffer buf (force-mode-line-update))))

(defconst garuda--read-only '(read-only t front-sticky t rear-nonsticky t)
  "Properties of the chat's text before the input.")

(defun garuda--keeping-input (fn)
  "Call FN, which changes the text before the input, keeping the input's places.
Point, and the point of every window on the chat, when in the prompt or
the input, keep their place in the input: a window at the end follows the
output, also when another window is selected."
  (let* ((in (marker-position garuda--input-marker))
         (out (marker-position garuda--output-marker))
         (rel (lambda (p) (and (>= p out) (max 0 (- p in)))))
         (pt (funcall rel (point)))
         (wins (mapcar (lambda (w) (cons w (funcall rel (window-point w))))
                       (get-buffer-window-list (current-buffer) nil t))))
    (let ((inhibit-read-only t)) (save-excursion (funcall fn)))
    (when pt (goto-char (+ garuda--input-marker pt)))
    (dolist (w wins)
      (when (cdr w) (set-window-point (car w) (+ garuda--input-marker (cdr w)))))))

(defun garuda--prompt-text ()
  "The prompt: prompts queued while a turn runs, then \"> \"."
  (concat "\n"
          (mapconcat (lambda (q) (format "\n⏳ queued: %s (sent when the running turn ends)"
                                         (car (split-string (car q) "\n"))))
                     garuda--queue "")
          "\n"
          (propertize "> " 'field 'garuda-prompt)))

(defun garuda--draw-prompt ()
  "Draw the prompt again between the output and the input."
  (garuda--keeping-input
   (lambda ()
     (delete-region garuda--output-marker garuda--input-marker)
     (goto-char garuda--output-marker)
     (insert (apply #'propertize (garuda--prompt-text) 'face 'garuda-note-face garuda--read-only))
     (set-marker garuda--input-marker (point)))))

(defun garuda--insert (text &optional face props)
  "Insert TEXT (with FACE and PROPS) at the end of the output, above the prompt."
  (garuda--keeping-input
   (lambda ()
     (goto-char garuda--output-marker)
     (let ((start (point)))
       (insert (if face (propertize text 'face face) text))
       (when props (add-text-properties start (point) props))
       (add-text-properties start (point) garuda--read-only)
       (set-marker garuda--output-marker (point))))))

(defun garuda--reset-chat ()
  "Empty the chat, keeping the text being typed."
  (let ((input (buffer-substring-no-properties garuda--input-marker (point-max)))
        (inhibit-read-only t))
    (erase-buffer)
    (set-marker garuda--output-marker (point-min))
    (set-marker garuda--input-marker (point-min))
    (setq garuda--queue nil garuda--mode nil)
    (garuda--draw-prompt)
    (goto-char (point-max))
    (insert input)))

(defun garuda--input-text ()
  "The text in the input area, or nil when empty."
  (let ((s (string-trim (buffer-substring-no-properties garuda--input-marker (point-max)))))
    (unless (string-empty-p s) s)))

(defun garuda--insert-section (lines face)
  "Insert LINES (a string) hidden under the preceding line; TAB shows them."
  (let ((text (replace-regexp-in-string "\n+\\'" "" (or lines ""))))
    (unless (string-empty-p text)
      (garuda--insert (concat "\n" (replace-regexp-in-string "^" "    " text))
                      face '(invisible garuda garuda-section t)))))

(defun garuda-toggle-section ()
  "Show or hide the tool output or thinking after the line at point."
  (interactive)
  (let* ((pos (line-end-position))
         (end (and (get-text-property pos 'garuda-section)
                   (next-single-property-change pos 'garuda-section nil (point-max)))))
    (if (not end)
        (message "Nothing folded here")
      (let ((inhibit-read-only t)
            (hidden (get-text-property pos 'invisible)))
        (with-silent-modifications
          (put-text-property pos end 'invisible (if hidden nil 'garuda)))))))

(defun garuda--plan-text (name input)
  "The plan of an `exit_plan_mode' call NAME with INPUT, trimmed, or nil."
  (let ((plan (and (equal name "exit_plan_mode") (listp input) (plist-get input :plan))))
    (and (stringp plan) (string-trim plan))))

(defun garuda--plan-quote (plan)
  "PLAN as chat lines: a quote, never folded (it is read before approving)."
  (mapconcat (lambda (l) (string-trim-right (concat "  > " l))) (split-string plan "\n") "\n"))

(defun garuda--describe-call (name input)
  "One line for tool call NAME with INPUT, format characters escaped."
  (garuda--escape-format-chars (garuda--raw-describe-call name input)))

(defun garuda--raw-describe-call (name input)
  "One line for tool call NAME with INPUT, as the input has it."
  (cond ((garuda--plan-text name input)
         (let ((n (length (split-string (garuda--plan-text name input) "\n"))))
           (format "exit_plan_mode: the plan (%d line%s)" n (if (= n 1) "" "s"))))
        ((and (equal name "bash") (plist-get input :command))
         (format "bash: %s" (replace-regexp-in-string "\n" " ⏎ " (plist-get input :command))))
        ((plist-get input :path) (format "%s: %s" name (plist-get input :path)))
        ((plist-get input :pattern) (format "%s: %s" name (plist-get input :pattern)))
        (t (let ((j (json-encode input)))
             (format "%s %s" name (if (> (length j) 100) (concat (substring j 0 97) "...") j))))))

(defun garuda--set-mode (mode)
  "Switch what is being streamed to MODE, inserting a heading when needed."
  (unless (eq garuda--mode mode)
    (pcase mode
      ('thinking
       (garuda--insert "\n💭 thinking (TAB shows it)" 'garuda-thinking-face)
       (garuda--insert "\n    " 'garuda-thinking-face '(invisible garuda garuda-section t)))
      ('text (garuda--insert (if garuda--mode "\n\n" "\n"))))
    (setq garuda--mode mode)))

(defun garuda--show-event (event)
  "Show turn EVENT in the current chat buffer."
  (pcase (plist-get event :kind)
    ("textDelta"
     (unless garuda--first-delta (setq garuda--first-delta (float-time)))
     (garuda--set-mode 'text)
     (garuda--insert (plist-get event :text)))
    ("thinkingDelta"
     (garuda--set-mode 'thinking)
     (garuda--insert (replace-regexp-in-string "\n" "\n    " (plist-get event :text))
                     'garuda-thinking-face '(invisible garuda garuda-section t)))
    ("stepStarted" (setq garuda--activity (format "step %d" (plist-get event :step))))
    ("toolCallStarted"
     (setq garuda--activity (format "⚙ %s" (plist-get event :name)) garuda--mode 'tool)
     (garuda--insert (format "\n▸ %s" (garuda--describe-call (plist-get event :name)
                                                             (plist-get event :input)))
                     'garuda-tool-face)
     (let ((plan (garuda--plan-text (plist-get event :name) (plist-get event :input))))
       (when plan (garuda--insert (concat "\n" (garuda--plan-quote plan))))))
    ("toolCallFinished"
     (setq garuda--activity nil garuda--agent-step nil
           garuda--agent-text (assoc-delete-all (plist-get event :id) garuda--agent-text))
     (let* ((meta (plist-get event :meta))
            (out (or (plist-get event :output) ""))
            (n (length (split-string (string-trim-right out) "\n")))
            (timed (cdr (assoc (plist-get event :id) garuda--timed-out))))
       (dolist (a garuda--approvals)
         (when (equal (plist-get (plist-get a :params) :toolCallId) (plist-get event :id))
           (setq garuda--approvals (delq a garuda--approvals))
           (garuda--close-approval a)
           ;; Withdrawn (e.g. a cancel): the next one, if any, is shown in its place.
           (garuda--next-approval)))
       (garuda--insert
        (concat "\n  "
                (cond ((or timed (equal (plist-get meta :approval) "timedOut")
                           (eq (plist-get meta :approvalTimedOut) t))
                       (format "⏱ not run: the approval timed out%s"
                               (if timed (format " after %d s" timed) "")))
                      ((eq (plist-get meta :cancelled) t) "✗ interrupted")
                      ;; The user's own hook refused it: not a failure, and the reason shown.
                      ((eq (plist-get meta :blockedByHook) t)
                       (let ((why (replace-regexp-in-string
                                   "\\`Blocked by a hook:[ \t]*" ""
                                   (car (split-string (string-trim out) "\n")))))
                         (if (string-empty-p why) "⛔ blocked by a hook"
                           (format "⛔ blocked by a hook: %s" why))))
                      ;; Why it failed is said on the line, not only in the folded output.
                      ((eq (plist-get event :isError) t)
                       (format "✗ failed: %s" (car (split-string (string-trim out) "\n"))))
                      (t "✓ done"))
                (if (plist-get meta :exitCode) (format " · exit %s" (plist-get meta :exitCode)) "")
                (format " · %d line%s (TAB shows)" n (if (= n 1) "" "s")))
        (if (eq (plist-get event :isError) t) 'garuda-error-face 'garuda-note-face))
       (garuda--insert-section out 'garuda-note-face)
       (setq garuda--mode 'tool)))
    ("usage" (setq garuda--context-tokens (plist-get event :contextTokens)
                   garuda--cache-ratio (plist-get event :sessionCacheHitRatio)
                   garuda--cache-miss (plist-get event :cacheMiss)))
    ("retry"
     (garuda--insert (format "\n⟳ retry %s: %s" (plist-get event :attempt) (plist-get event :reason))
                     'garuda-note-face))
    ("todos"
     (garuda--insert
      (concat "\n☰ todo"
              (mapconcat (lambda (td)
                           (format "\n  %s %s"
                                   (pcase (plist-get td :status)
                                     ("completed" "[x]") ("in_progress" "[>]") (_ "[ ]"))
                                   (plist-get td :content)))
                         (plist-get event :todos) ""))
      'garuda-note-face)
     (setq garuda--mode 'tool))
    ("modeChanged"
     (garuda--insert (format "\n⚙ plan approved: approvals %s from now on" (plist-get event :policy))
                     'garuda-note-face)
     (setq garuda--mode 'tool))
    ("compaction" (garuda--show-compaction event))
    ("hook" (garuda--show-hook event)))
  (force-mode-line-update))

(defun garuda--last-line (text &optional max)
  "The last non-empty line of TEXT, cut to MAX (80) characters."
  (let* ((lines (seq-remove #'string-empty-p (mapcar #'string-trim (split-string (or text "") "\n"))))
         (last (or (car (last lines)) ""))
         (max (or max 80)))
    (if (> (length last) max) (concat (substring last 0 (1- max)) "…") last)))

(defun garuda--agent-line (name event)
  "A chat line for EVENT of agent NAME under its explore/agent call, or nil."
  (let ((what
         (pcase (plist-get event :kind)
           ("toolCallStarted" (garuda--describe-call (plist-get event :name) (plist-get event :input)))
           ("toolCallFinished"
            (when (or (eq (plist-get event :isError) t)
                      (eq (plist-get (plist-get event :meta) :blockedByHook) t))
              (format "✗ %s failed" (plist-get event :name))))
           ("retry" (format "⟳ retry %s: %s" (plist-get event :attempt) (plist-get event :reason)))
           ("compaction"
            (when (member (plist-get event :phase) '("finished" "failed"))
              (format "⟲ compaction %s" (plist-get event :phase))))
           ("hook"
            (when (member (plist-get event :phase) '("blocked" "failed"))
              (format "⚠ hook %s %s%s" (plist-get event :event) (plist-get event :phase)
                      (if (plist-get event :message) (format ": %s" (plist-get event :message)) "")))))))
    (when what (format "  ↳ %s: %s" name (replace-regexp-in-string "\n" " " what)))))

(defun garuda--show-agent-event (agent event)
  "Show EVENT relayed from AGENT under its explore/agent call.
Its calls get a line there, folded under the call (TAB on it shows them);
its text only sets the header line's step
\(a bounded tail is kept), so the agent's words never read as the session's."
  (let ((name (or (plist-get agent :name) "agent"))
        (call (plist-get agent :toolCallId)))
    (if (equal (plist-get event :kind) "textDelta")
        (let* ((old (or (cdr (assoc call garuda--agent-text)) ""))
               (text (concat old (plist-get event :text)))
               (text (if (> (length text) 2000) (substring text -2000) text))
               (last (garuda--last-line text)))
          (setf (alist-get call garuda--agent-text nil nil #'equal) text)
          (unless (string-empty-p last) (setq garuda--agent-step (format "%s: %s" name last))))
      (when (equal (plist-get event :kind) "toolCallStarted")
        (setq garuda--agent-step
              (format "%s: %s" name (garuda--describe-call (plist-get event :name)
                                                           (plist-get event :input)))))
      (let ((line (garuda--agent-line name event)))
        (when line
          ;; Hidden under the explore/agent call's line: TAB there shows the agent's steps.
          (garuda--insert (concat "\n" line) 'garuda-note-face
                          '(invisible garuda garuda-section t))
          (setq garuda--mode 'tool)))))
  (force-mode-line-update))

(defun garuda--show-hook (event)
  "A line for hook EVENT that blocked, failed or has a message; the rest is quiet.
A blocked tool call says so on its own status line, so PreToolUse's
block is not repeated."
  (let* ((what (concat (plist-get event :event)
                       (if (plist-get event :subject) (format " (%s)" (plist-get event :subject)) "")))
         (msg (plist-get event :message))
         (line (pcase (plist-get event :phase)
                 ("blocked" (unless (equal (plist-get event :event) "PreToolUse")
                              (concat "⛔ hook " what " blocked" (if msg (concat ": " msg) ""))))
                 ("failed" (format "⚠ hook %s failed: %s" what (or msg "?")))
                 ("finished" (and msg (format "⚓ hook %s: %s" what msg))))))
    (when line
      (garuda--insert (concat "\n" line) 'garuda-note-face)
      (setq garuda--mode 'tool))))

(defun garuda--show-compaction (event)
  "One line for a finished, failed or paused compaction EVENT."
  (let ((phase (plist-get event :phase)))
    (setq garuda--compaction-seen t)
    (if (member phase '("started" "stage1" "summary"))
        (setq garuda--activity "compacting")
      (setq garuda--activity nil)
      (when (and (equal phase "finished") (plist-get event :tokensAfter))
        (setq garuda--context-tokens (plist-get event :tokensAfter)))
      (garuda--insert
       (concat "\n"
               (pcase phase
                 ("finished"
                  (format "⟲ context compacted (%s, %s): %s → %s tokens · M-x garuda-summary shows the summary"
                          (plist-get event :trigger) (or (plist-get event :message) "summary")
                          (garuda--tokens (plist-get event :tokensBefore))
                          (garuda--tokens (plist-get event :tokensAfter))))
                 ("failed" (format "⟲ compaction not done (%s): %s" (plist-get event :trigger)
                                   (plist-get event :message)))
                 ("paused" (format "⟲ auto-compaction paused after repeated failures: %s"
                                   (or (plist-get event :message) "")))
                 (_ (format "⟲ compaction %s" phase))))
       'garuda-note-face)
      (setq garuda--mode 'tool))))

(defun garuda--new-session (buf)
  "Create a session for chat BUF (on its first prompt); return its id."
  (with-current-buffer buf
    (setq garuda--workspace-id (garuda--workspace garuda--root))
    (let ((res (condition-case err
                   (garuda--call "session/new"
                                 (append (list :workspaceId garuda--workspace-id :policy garuda-policy)
                                         (and garuda-model (list :model garuda-model))))
                 (user-error
                  ;; Say which setting gave the model the server did not take.
                  (if (and garuda-model (string-match-p "provider\\|model" (cadr err)))
                      (user-error "%s (the model %S is the value of `garuda-model'; M-x customize-variable RET garuda-model)"
                                  (cadr err) garuda-model)
                    (signal (car err) (cdr err)))))))
      (setq garuda--session-id (plist-get res :sessionId)
            garuda--session-conn garuda--connection
            garuda--fresh nil
            garuda--model (plist-get res :model)
            garuda--window (plist-get res :contextWindow)
            garuda--context-tokens nil garuda--always nil garuda--timed-out nil)
      (puthash garuda--session-id buf garuda--buffers)
      (garuda--insert (format "\nnew session · model %s · context window %s tokens · policy %s"
                              garuda--model (garuda--tokens garuda--window) garuda-policy)
                      'garuda-note-face)
      (seq-doseq (w (plist-get res :warnings))
        (garuda--insert (format "\n⚠ %s" w) 'garuda-note-face))
      garuda--session-id)))

(defun garuda--latest-session (ws)
  "The most recent session of workspace WS (headless runs left out), or nil."
  (car (garuda--sorted-sessions
        (plist-get (garuda--call "session/list" (list :workspaceId ws)) :sessions))))

(defun garuda--resume (buf sid)
  "Load session SID into chat BUF, show its history; return SID."
  (let ((loaded (garuda--call "session/load" (list :sessionId sid)))
        (messages (garuda--all-messages sid)))
    (with-current-buffer buf
      (garuda--reset-chat)
      (when garuda--session-id (remhash garuda--session-id garuda--buffers))
      (setq garuda--session-id sid garuda--session-conn garuda--connection garuda--fresh nil
            garuda--workspace-id (plist-get loaded :workspaceId)
            garuda--model (plist-get loaded :model) garuda--window nil garuda--context-tokens nil
            garuda--always nil garuda--timed-out nil)
      (puthash sid buf garuda--buffers)
      (garuda--insert (format "Garuda · %s · model %s · session %s"
                              (file-name-nondirectory garuda--root) garuda--model sid)
                      'garuda-note-face)
      (garuda--insert-history messages)
      (garuda--insert "\n\n[resumed: the next prompt continues this session; C-c C-n starts a new one]"
                      'garuda-note-face)
      ;; The header's context use, as it was when the session was left.
      (let ((info (ignore-errors (garuda--call "context/inspect" (list :sessionId sid)))))
        (when info
          (setq garuda--window (plist-get info :window)
                garuda--context-tokens (plist-get info :contextTokens))
          (force-mode-line-update)))
      sid)))

(defun garuda--ensure-session (buf)
  "Chat BUF's session on the running server; return its id.
After a restart of the server the session is loaded again; a chat
without one continues the project's latest session (see
`garuda-continue-latest') or starts one."
  (with-current-buffer buf
    (let ((conn (garuda--connect)))
      (cond
       ((and garuda--session-id (eq garuda--session-conn conn)))
       (garuda--session-id
        (setq garuda--workspace-id (garuda--workspace garuda--root))
        (condition-case nil
            (progn (garuda--call "session/load" (list :sessionId garuda--session-id))
                   (setq garuda--session-conn conn))
          (user-error (setq garuda--session-id nil) (garuda--new-session buf))))
       ((and garuda-continue-latest (not garuda--fresh)
             (let ((latest (garuda--latest-session (garuda--workspace garuda--root))))
               (and latest (garuda--resume buf (plist-get latest :sessionId))))))
       (t (garuda--new-session buf)))
      (puthash garuda--session-id buf garuda--buffers)
      garuda--session-id)))

(defun garuda--chat-buffer (root)
  "Return the chat buffer for ROOT, creating it; no session is created.
A new chat shows the project's latest session when `garuda-continue-latest'."
  (let* ((name (format "*garuda: %s*" (file-name-nondirectory (directory-file-name root))))
         (old (get-buffer name))
         (buf (get-buffer-create name)))
    (with-current-buffer buf
      (unless (and old (derived-mode-p 'garuda-chat-mode))
        (garuda-chat-mode)
        (setq default-directory (file-name-as-directory root)
              garuda--root root)
        (condition-case err
            (let ((latest (and garuda-continue-latest
                               (garuda--latest-session (garuda--workspace root)))))
              (if latest
                  (garuda--resume buf (plist-get latest :sessionId))
                (setq garuda--fresh t)
                (garuda--insert (format "Garuda · %s · the first prompt starts a session"
                                        (file-name-nondirectory root))
                                'garuda-note-face)))
          (error
           (garuda--insert (format "Garuda · %s\n[error: %s]" (file-name-nondirectory root)
                                   (error-message-string err))
                           'garuda-error-face)))))
    buf))

(defun garuda--root ()
  "The project root of the current buffer, else `default-directory'."
  (or (and (derived-mode-p 'garuda-chat-mode) garuda--root)
      (directory-file-name
       (file-truename
        (expand-file-name
         (let ((pr (project-current)))
           (if pr (project-root pr) default-directory)))))))

(defun garuda--chat-buffer-for-command ()
  "The chat buffer a command run in the current buffer is about."
  (if (derived-mode-p 'garuda-chat-mode) (current-buffer) (garuda--chat-buffer (garuda--root))))

;;;###autoload
(defun garuda (&optional root)
  "Open the Garuda chat buffer for ROOT (default: the current project)."
  (interactive)
  (let ((buf (garuda--chat-buffer (directory-file-name
                                   (file-truename (expand-file-name (or root (garuda--root))))))))
    (pop-to-buffer buf)
    (goto-char (point-max))
    buf))

(defun garuda-new-chat ()
  "Start a new chat for this project: its first prompt starts a new session."
  (interactive)
  (let ((buf (garuda--chat-buffer-for-command)))
    (with-current-buffer buf
      (when garuda--running (user-error "Garuda: a turn is running; `garuda-cancel' it first"))
      (garuda--reset-chat)
      (when garuda--session-id (remhash garuda--session-id garuda--buffers))
      (setq garuda--session-id nil garuda--session-conn nil garuda--fresh t
            garuda--model nil garuda--window nil garuda--context-tokens nil
            garuda--always nil garuda--timed-out nil)
      (garuda--insert (format "Garuda · %s · new chat: the first prompt starts a session"
                              (file-name-nondirectory garuda--root))
                      'garuda-note-face))
    (pop-to-buffer buf)
    buf))

(defun garuda-send-input ()
  "Send the text in the input area as a prompt.
While a turn runs, the text is queued (shown above the prompt) and sent
when the turn ends."
  (interactive)
  (if (< (point) garuda--input-marker)
      (garuda-toggle-section)
    (let ((text (garuda--input-text)))
      (when text
        (let ((inhibit-read-only t)) (delete-region garuda--input-marker (point-max)))
        (garuda--submit (current-buffer) text nil)))))

(defun garuda-self-insert ()
  "Insert the typed character; typed in the output, it goes to the input."
  (interactive)
  (when (< (point) garuda--input-marker) (goto-char (point-max)))
  (call-interactively #'self-insert-command))

(defun garuda--submit (buf text blocks)
  "Send TEXT (and extra BLOCKS) in chat BUF now, or queue it while a turn runs."
  (with-current-buffer buf
    (if garuda--running
        (progn
          (setq garuda--queue (append garuda--queue (list (cons text blocks))))
          (garuda--draw-prompt)
          (force-mode-line-update))
      (garuda--start-turn buf text blocks))))

(defun garuda-send (prompt)
  "Ask PROMPT in the current project's chat; return at once.
Works from the chat buffer and from any file buffer of the project."
  (interactive (list (read-string "Ask Garuda: ")))
  (let ((buf (garuda--chat-buffer-for-command)))
    (display-buffer buf)
    (garuda--submit buf prompt nil)
    buf))

(defun garuda--region-block (beg end)
  "A context block with the lines from BEG to END of the current buffer."
  (let* ((l1 (line-number-at-pos beg))
         (l2 (line-number-at-pos (if (and (> end beg) (eq (char-before end) ?\n)) (1- end) end)))
         (file (or (buffer-file-name) (buffer-name)))
         (root (garuda--root))
         (rel (if (buffer-file-name) (file-relative-name file root) file))
         (lang (replace-regexp-in-string "-mode\\'" "" (symbol-name major-mode))))
    (list :rel rel :l1 l1 :l2 l2
          :block (list :type "text"
                       :text (format "<context path=\"%s\" lines=\"%d-%d\">\n```%s\n%s\n```\n</context>"
                                     rel l1 l2 lang
                                     (string-trim-right
                                      (buffer-substring-no-properties beg end) "\n"))))))

(defun garuda-send-region (beg end prompt)
  "Ask PROMPT about the region from BEG to END (else the whole buffer)."
  (interactive
   (let ((r (use-region-p)))
     (list (if r (region-beginning) (point-min)) (if r (region-end) (point-max))
           (read-string (if r "Ask Garuda about the region: " "Ask Garuda about this buffer: ")))))
  (let* ((sel (garuda--region-block beg end))
         (buf (garuda--chat-buffer-for-command)))
    (display-buffer buf)
    (garuda--submit buf (format "%s\n(with %s lines %d-%d)" prompt (plist-get sel :rel)
                                (plist-get sel :l1) (plist-get sel :l2))
                    (list :prompt prompt :blocks (list (plist-get sel :block))))
    buf))

(defun garuda--died-text (conn)
  "Why the server of CONN ended, with the last lines of its log."
  (let ((tail (garuda--stderr-tail conn)))
    (format "garuda exited (%s)%s"
            (garuda--exit-description (and conn (jsonrpc--process conn)))
            (if tail (concat "; last lines of its log:\n" (string-join tail "\n")) ""))))

(defun garuda--start-turn (buf text extra)
  "Run a turn in chat BUF showing TEXT; EXTRA is nil or (:prompt P :blocks B)."
  (with-current-buffer buf
    (let ((sid (condition-case err
                   (garuda--ensure-session buf)
                 (error
                  (garuda--insert (concat "\n\n> " text) 'garuda-note-face)
                  (garuda--insert (format "\n[error: %s]" (error-message-string err)) 'garuda-error-face)
                  (garuda--drop-queue "not sent")
                  nil))))
      (when sid
        (let ((conn garuda--connection)
              (input (vconcat (list (list :type "text" :text (or (plist-get extra :prompt) text)))
                              (plist-get extra :blocks))))
          (setq garuda--turn-from (copy-marker garuda--output-marker))
          (garuda--insert (concat "\n\n> " text "\n") 'garuda-note-face)
          (setq garuda--running t garuda--last-result nil garuda--mode nil garuda--activity "step 1"
                garuda--turn-start (float-time) garuda--first-delta nil garuda--compaction-seen nil)
          (force-mode-line-update)
          (condition-case err
              (jsonrpc-async-request
               conn 'turn/run
               (list :sessionId sid :input input)
               :timeout nil
               :success-fn (lambda (res) (garuda--turn-done buf sid res (plist-get res :stopReason)))
               :error-fn (lambda (err)
                           (garuda--turn-done
                            buf sid (list :error err)
                            (if (equal (plist-get err :message) "Server died")
                                (concat "error: " (garuda--died-text conn))
                              (format "error: %s" (garuda--error-message err))))))
            (error (garuda--turn-done buf sid (list :error err)
                                      (format "error: %s" (error-message-string err))))))))))

(defun garuda--trim-stderr ()
  "Keep the last 200 lines of the server's stderr log once it passes 1000."
  (let ((sb (garuda--stderr-buffer)))
    (when sb
      (with-current-buffer sb
        (when (> (count-lines (point-min) (point-max)) 1000)
          (let ((inhibit-read-only t))
            (save-excursion
              (goto-char (point-max))
              (forward-line -200)
              (delete-region (point-min) (point)))))))))

(defun garuda--drop-queue (why)
  "Drop the queued prompts, saying so in the chat (WHY: what happened).
During a turn the note waits for its end, so no tool's result is cut
from its tool line."
  (when garuda--queue
    (let ((note (format "\n⏳ %s: %s dropped, not sent: %s" why
                        (if (cdr garuda--queue) "the queued prompts were" "the queued prompt was")
                        (mapconcat (lambda (q) (car (split-string (car q) "\n"))) garuda--queue " · "))))
      (if garuda--running
          (setq garuda--dropped-note (concat garuda--dropped-note note))
        (garuda--insert note 'garuda-note-face)))
    (setq garuda--queue nil)
    (garuda--draw-prompt)
    (force-mode-line-update)))

(defun garuda--turn-done (buf sid result label)
  "Record RESULT of SID's turn in BUF, show LABEL, send what is queued.
A turn that ends in an error drops the queue (shown), never sends it."
  (garuda--trim-stderr)
  (when (buffer-live-p buf)
    (with-current-buffer buf
      (setq garuda--running nil garuda--last-result result garuda--activity nil garuda--mode nil
            garuda--agent-step nil garuda--agent-text nil)
      (unless (equal label "end_turn")
        (garuda--insert (format "\n[%s]" label)
                        (if (plist-get result :error) 'garuda-error-face 'garuda-note-face)))
      (when garuda--dropped-note
        (garuda--insert garuda--dropped-note 'garuda-note-face)
        (setq garuda--dropped-note nil))
      (if (plist-get result :error)
          (garuda--drop-queue "the turn failed")
        (when garuda--queue
          (let ((next (pop garuda--queue)))
            (garuda--draw-prompt)
            (run-at-time 0 nil (lambda ()
                                 (when (buffer-live-p buf)
                                   (garuda--start-turn buf (car next) (cdr next))))))))
      ;; The next question goes at the prompt, wherever point was left.
      (let ((from (or garuda--turn-from garuda--input-marker)))
        (dolist (w (get-buffer-window-list buf nil t))
          (when (>= (window-point w) from) (set-window-point w (point-max))))
        (when (>= (point) from) (goto-char (point-max))))
      (force-mode-line-update)))
  (run-hook-with-args 'garuda-turn-finished-functions sid result))

(defun garuda--session (&optional create)
  "The session of this chat (or the project's), loaded on the running server.
Without CREATE, a chat that has none yet is an error."
  (let ((buf (garuda--chat-buffer-for-command)))
    (unless (or create (buffer-local-value 'garuda--session-id buf))
      (user-error "Garuda: this chat has no session yet; the first prompt starts one"))
    (garuda--ensure-session buf)))

(defun garuda-cancel ()
  "Cancel the running turn (and drop queued prompts, saying so)."
  (interactive)
  (with-current-buffer (garuda--chat-buffer-for-command)
    (garuda--drop-queue "cancel")
    (if (not (and garuda--running garuda--session-id))
        (progn (message "Garuda: no turn is running") nil)
      (garuda--call "turn/cancel" (list :sessionId garuda--session-id)))))

(defun garuda-configure (&optional model policy)
  "Switch the session's MODEL or its approval POLICY.
The model applies from the next model request (the model is told by a
note); the policy (ask, auto-edit, full-auto, plan) from the next tool call.
Interactively: with a prefix argument, ask for the policy, else the model."
  (interactive
   (if current-prefix-arg
       (list nil (completing-read "Approval policy: " '("ask" "auto-edit" "full-auto" "plan") nil t))
     (list (read-string "Model (e.g. anthropic/claude-haiku-4-5): ") nil)))
  (let* ((buf (garuda--chat-buffer-for-command))
         (res (garuda--call "session/configure"
                            (append (list :sessionId (garuda--session t))
                                    (and model (not (string-empty-p model)) (list :model model))
                                    (and policy (list :policy policy))))))
    (garuda--note buf (format "⚙ model %s · approvals %s\n"
                              (plist-get res :model) (plist-get res :policy)))
    res))

(defun garuda-set-model (model)
  "Switch the session's model to MODEL; the conversation stays."
  (interactive (list (read-string "Model (e.g. anthropic/claude-haiku-4-5): ")))
  (garuda-configure model nil))

(defun garuda-set-policy (policy)
  "Switch the session's approval POLICY: ask, auto-edit, full-auto or plan."
  (interactive (list (completing-read "Approval policy: " '("ask" "auto-edit" "full-auto" "plan") nil t)))
  (garuda-configure nil policy))

(defun garuda-compact (&optional focus)
  "Compact the session's history, keeping FOCUS in the summary."
  (interactive (list (let ((f (read-string "Compaction focus (optional): ")))
                       (unless (string-empty-p f) f))))
  (let ((buf (garuda--chat-buffer-for-command)))
    (with-current-buffer buf
      (setq garuda--compaction-seen nil garuda--activity "compacting")
      (force-mode-line-update))
    (let ((res (unwind-protect
                   (garuda--call "session/compact"
                                 (append (list :sessionId (garuda--session))
                                         (and focus (list :focus focus))))
                 (with-current-buffer buf (setq garuda--activity nil)))))
      (with-current-buffer buf
        (unless garuda--compaction-seen
          (garuda--show-compaction
           (if (eq (plist-get res :compacted) t)
               (list :phase "finished" :trigger "manual" :message (plist-get res :kind)
                     :tokensBefore (plist-get res :tokensBefore) :tokensAfter (plist-get res :tokensAfter))
             (list :phase "failed" :trigger "manual" :message (plist-get res :message)))))
        (force-mode-line-update))
      res)))

(defun garuda-context ()
  "Show the session's token accounting (`context/inspect') in a buffer."
  (interactive)
  (let ((res (garuda--call "context/inspect" (list :sessionId (garuda--session)))))
    (with-current-buffer (get-buffer-create "*garuda context*")
      (let ((inhibit-read-only t)
            (window (plist-get res :window)))
        (erase-buffer)
        (dolist (row '((:system . "system prompt") (:tools . "tool specs")
                       (:instructions . "instructions") (:memory . "memory")
                       (:messages . "messages") (:reserved . "reserved (output)") (:free . "free")))
          (let ((v (plist-get res (car row))))
            (when (and (numberp v) (numberp window) (> window 0))
              (insert (format "%-18s %8d  %5.1f%%\n" (cdr row) v (/ (* 100.0 v) window))))))
        (insert (format "\n%-18s %8s\n%-18s %8s\n%-18s %8s\n" "window" window
                        "context now" (plist-get res :contextTokens)
                        "compacts above" (plist-get res :threshold)))
        (when (eq (plist-get res :paused) t)
          (insert "auto-compaction paused after repeated failures\n"))
        (special-mode))
      (display-buffer (current-buffer))
      res)))

;;;; History

(defun garuda--all-messages (sid)
  "Every message of session SID."
  (let ((cursor 0) (out nil))
    (while cursor
      (let ((page (garuda--call "session/messages" (list :sessionId sid :cursor cursor :limit 1000))))
        (setq out (append out (append (plist-get page :messages) nil))
              cursor (plist-get page :nextCursor))))
    out))

(defun garuda--readable-summary (texts)
  "The text blocks TEXTS of a compaction summary as sections a person reads.
The model-facing parts go: the intro addressed to the model and the tags
around the user's first request, their messages and the summary."
  (let ((out nil))
    (dolist (tx texts)
      (cond
       ((string-prefix-p "This session continues from an earlier" tx))
       ((string-match "\\`<first_user_request>\n?\\(\\(?:.\\|\n\\)*?\\)\n?</first_user_request>" tx)
        (push (concat "First request:\n" (match-string 1 tx)) out))
       ((string-prefix-p "<user_messages>" tx)
        (let ((msgs nil) (start 0))
          (while (string-match "<message>\n?\\(\\(?:.\\|\n\\)*?\\)\n?</message>" tx start)
            (push (concat "• " (replace-regexp-in-string "\n" "\n  " (match-string 1 tx))) msgs)
            (setq start (match-end 0)))
          (when (string-match "^\\(\\[[0-9]+ earlier user message.*\\]\\)$" tx)
            (push (match-string 1 tx) msgs))
          (push (concat "Your messages from that part:\n" (string-join (nreverse msgs) "\n")) out)))
       ((string-match "\\`<files_edited>\n?\\(\\(?:.\\|\n\\)*?\\)\n?</files_edited>" tx)
        ;; Its first line tells the model what the list is; the heading says it here.
        (push (concat "Files edited:\n"
                      (replace-regexp-in-string "\\`Files created or changed[^\n]*\n" ""
                                                (match-string 1 tx)))
              out))
       ((string-prefix-p "<summary>" (string-trim tx))
        (push (concat "Summary:\n" (garuda--summary-body tx)) out))
       (t (push tx out))))
    (string-join (nreverse out) "\n\n")))

(defun garuda--summary-body (text)
  "The summary in TEXT (a `<summary>' block) without its tags and without
a heading of its own that says Summary again (the section is titled so)."
  (let ((body (string-trim
               (replace-regexp-in-string "</?\\(?:summary\\|references\\)>\n?" "" text))))
    (string-trim
     (replace-regexp-in-string "\\`#+[ \t]*\\(?:\\*\\*\\)?Summary\\(?:\\*\\*\\)?:?[ \t]*\n+" "" body))))

(defun garuda--result-text (block)
  "The text of a tool_result BLOCK."
  (mapconcat (lambda (c) (or (plist-get c :text) "")) (plist-get block :content) ""))

(defun garuda--insert-history (messages)
  "Insert MESSAGES in the current chat: summaries as summaries, each step once.
The steps a compaction kept are copies marked `copyOf' by the server; a
message is never left out because its text matches an earlier one."
  (let ((results (make-hash-table :test #'equal))
        (last-role nil))
    (dolist (m messages)
      (seq-doseq (b (plist-get m :content))
        (when (equal (plist-get b :type) "tool_result")
          (puthash (plist-get b :tool_use_id) b results))))
    (dolist (m messages)
      (let ((meta (plist-get m :meta))
            (texts (delq nil (mapcar (lambda (b) (and (equal (plist-get b :type) "text")
                                                      (plist-get b :text)))
                                     (plist-get m :content)))))
        (cond
         ((plist-get m :copyOf) nil)
         ((member meta '("summary" "handoff"))
          (garuda--insert (format "\n⟲ earlier conversation compacted; the model continues from this %s (TAB shows it)"
                                  meta)
                          'garuda-note-face)
          (garuda--insert-section (garuda--readable-summary texts) 'garuda-thinking-face)
          (setq last-role nil))
         ((member meta '("restored_file" "restoredfile"))
          (dolist (tx texts)
            (when (string-match "<restored_file path=\"\\([^\"]*\\)\"" tx)
              (garuda--insert (format "\n↻ re-read after compaction: %s" (match-string 1 tx))
                              'garuda-note-face))))
         ((equal meta "plan")
          (garuda--insert "\n  ✓ the plan above was approved" 'garuda-note-face))
         (meta nil)
         ((equal (plist-get m :role) "user")
          (let ((shown (delq nil
                             (mapcar (lambda (tx)
                                       (cond ((string-prefix-p "<garuda_note>" tx)
                                              "(instruction files changed)")
                                             ((string-match "\\`<context path=\"\\([^\"]*\\)\" lines=\"\\([^\"]*\\)\"" tx)
                                              (format "(with %s lines %s)" (match-string 1 tx) (match-string 2 tx)))
                                             (t tx)))
                                     texts))))
            (when shown
              (garuda--insert (concat "\n\n> " (string-join shown "\n")) 'garuda-note-face)
              (setq last-role "user"))))
         (t
          (unless (equal last-role "assistant") (garuda--insert "\n"))
          (seq-doseq (b (plist-get m :content))
            (pcase (plist-get b :type)
              ("thinking"
               (garuda--insert "\n💭 thinking (TAB shows it)" 'garuda-thinking-face)
               (garuda--insert-section (plist-get b :thinking) 'garuda-thinking-face))
              ("text" (garuda--insert (concat "\n" (plist-get b :text))))
              ("tool_use"
               (garuda--insert (format "\n▸ %s" (garuda--describe-call (plist-get b :name)
                                                                       (plist-get b :input)))
                               'garuda-tool-face)
               (let ((plan (garuda--plan-text (plist-get b :name) (plist-get b :input))))
                 (when plan (garuda--insert (concat "\n" (garuda--plan-quote plan)))))
               (let ((r (gethash (plist-get b :id) results)))
                 (when r
                   (garuda--insert (if (eq (plist-get r :is_error) t) "\n  ✗ failed" "\n  ✓ done")
                                   'garuda-note-face)
                   (garuda--insert-section (garuda--result-text r) 'garuda-note-face))))))
          (setq last-role "assistant")))))))

(defun garuda--session-title (s)
  "The title of session S, as the picker shows it."
  (let ((title (plist-get s :title)))
    (if (and (stringp title) (not (string-empty-p title)) (not (string-prefix-p "<garuda_note>" title)))
        (car (split-string title "\n"))
      "(no text yet)")))

(defun garuda--session-when (s)
  "When session S was last active, e.g. \"today 14:05\" or \"2026-11-30 09:12\"."
  (let ((time (/ (or (plist-get s :updated) (plist-get s :created) 0) 1000.0)))
    (if (equal (format-time-string "%F" time) (format-time-string "%F"))
        (format-time-string "today %H:%M" time)
      (format-time-string "%F %H:%M" time))))

(defun garuda--session-choices (sessions)
  "Alist of picker lines to SESSIONS (newest first): the titles, made unique."
  (let ((seen (make-hash-table :test #'equal)))
    (mapcar (lambda (s)
              (let* ((title (garuda--session-title s))
                     (n (cl-incf (gethash title seen 0))))
                (cons (if (= n 1) title (format "%s <%d>" title n)) s)))
            sessions)))

(defun garuda--sorted-sessions (sessions)
  "SESSIONS newest first; headless runs, agents' sub-sessions and sessions never
written in (no title: none of the user's words) left out."
  (sort (cl-remove-if (lambda (s) (or (equal (plist-get s :origin) "exec")
                                      (plist-get s :parentSessionId)
                                      (not (stringp (plist-get s :title)))))
                      (append sessions nil))
        (lambda (a b) (> (or (plist-get a :updated) (plist-get a :created) 0)
                         (or (plist-get b :updated) (plist-get b :created) 0)))))

(defun garuda-sessions ()
  "Pick one of this project's sessions by its title (newest first) and resume it.
RET at once resumes the newest; the time and size are shown beside."
  (interactive)
  (let* ((buf (garuda--chat-buffer-for-command))
         (ws (with-current-buffer buf
               (garuda--connect)
               (setq garuda--workspace-id (garuda--workspace garuda--root))))
         (choices (garuda--session-choices
                   (garuda--sorted-sessions
                    (plist-get (garuda--call "session/list" (list :workspaceId ws)) :sessions))))
         (width (apply #'max 10 (mapcar (lambda (c) (string-width (car c))) choices)))
         (table (lambda (string pred action)
                  (if (eq action 'metadata)
                      `(metadata (display-sort-function . identity)
                                 (cycle-sort-function . identity)
                                 (annotation-function
                                  . ,(lambda (c)
                                       (let ((s (cdr (assoc c choices))))
                                         (when s
                                           (format "%s  %s · %d messages"
                                                   (make-string (- (1+ width) (string-width c)) ?\s)
                                                   (garuda--session-when s)
                                                   (or (plist-get s :messageCount) 0)))))))
                    (complete-with-action action choices string pred)))))
    (unless choices (user-error "Garuda: this project has no sessions yet"))
    (let* ((pick (cdr (assoc (completing-read (format-prompt "Resume Garuda session" (caar choices))
                                              table nil t nil nil (caar choices))
                             choices)))
           (sid (plist-get pick :sessionId)))
      (unless sid (user-error "Garuda: no session chosen"))
      (when (buffer-local-value 'garuda--running buf)
        (user-error "Garuda: a turn is running; `garuda-cancel' it first"))
      (garuda--resume buf sid)
      (pop-to-buffer buf)
      (goto-char (point-max))
      sid)))

(defun garuda-summary ()
  "Show the latest compaction summary of this chat's session."
  (interactive)
  (let* ((sid (garuda--session))
         (m (car (last (cl-remove-if-not (lambda (m) (member (plist-get m :meta) '("summary" "handoff")))
                                         (garuda--all-messages sid))))))
    (unless m (user-error "Garuda: this session has not been compacted"))
    (with-current-buffer (get-buffer-create "*garuda summary*")
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert (garuda--readable-summary
                 (delq nil (mapcar (lambda (b) (and (equal (plist-get b :type) "text") (plist-get b :text)))
                                   (plist-get m :content)))))
        (goto-char (point-min))
        (special-mode))
      (pop-to-buffer (current-buffer))
      (current-buffer))))

;;;; Doctor

(defun garuda--configured-model ()
  "(MODEL . SOURCE): `garuda-model', else the model in Garuda's config.toml."
  (if garuda-model
      (cons garuda-model "`garuda-model'")
    (let* ((xdg (or (getenv "XDG_CONFIG_HOME") (expand-file-name "~/.config")))
           (path (expand-file-name "garuda/config.toml" xdg)))
      (cons (and (file-readable-p path)
                 (with-temp-buffer
                   (insert-file-contents path)
                   (goto-char (point-min))
                   (let ((limit (save-excursion (if (re-search-forward "^[ \t]*\\[" nil t)
                                                    (point) (point-max)))))
                     (and (re-search-forward "^[ \t]*model[ \t]*=[ \t]*\"\\([^\"]*\\)\"" limit t)
                          (match-string 1)))))
            path))))

(defun garuda-doctor ()
  "Check the binary, its version, the model and the key it needs; show a report.
Returns a list of (LEVEL . TEXT), LEVEL being ok, warn or error."
  (interactive)
  (let ((report nil)
        (process-environment (append garuda-environment process-environment)))
    (cl-flet ((add (level fmt &rest args) (push (cons level (apply #'format fmt args)) report)))
      (let ((bin (executable-find garuda-program)))
        (if (not bin)
            (add 'error "garuda binary not found: %S is not on exec-path; install it (cargo install --path . in the garuda repository) or set `garuda-program'" garuda-program)
          (add 'ok "binary: %s" bin)
          (with-temp-buffer
            (if (eq 0 (call-process bin nil t nil "--version"))
                (add 'ok "version: %s" (string-trim (buffer-string)))
              (add 'error "`%s --version' failed: %s" bin (string-trim (buffer-string)))))
          ;; Start a server as the chat would: a broken config.toml shows here, in its words.
          (condition-case err
              (let ((conn (garuda--start-server "garuda-doctor"
                                                (format "doctor-%d-%d" (emacs-pid) (random 1000000))
                                                #'ignore)))
                (unwind-protect
                    (progn
                      (add 'ok "server: starts and answers initialize")
                      ;; An unknown key is a warning; an invalid value an error (no session
                      ;; starts until the file is fixed; the server reloads it when saved).
                      (seq-doseq (p (plist-get (plist-get (process-get (jsonrpc--process conn) 'garuda-init)
                                                          :garuda)
                                               :configProblems))
                        (add (if (equal (plist-get p :severity) "error") 'error 'warn)
                             "server: config: %s" (garuda--problem-text p)))
                      (let ((root (garuda--root)))
                        (condition-case err
                            (let ((ws (jsonrpc-request conn 'workspace/open (list :root root)
                                                       :timeout garuda-request-timeout)))
                              (add 'ok "project %s opens" root)
                              (seq-doseq (w (plist-get ws :warnings)) (add 'warn "%s" w)))
                          (jsonrpc-error (add 'error "project %s: %s" root (garuda--error-message err))))))
                  ;; The doctor's own server ends as asked: jsonrpc.el's "[jsonrpc] Server
                  ;; exited with status 0" would read as a problem.
                  (let ((inhibit-message t) (message-log-max nil))
                    (ignore-errors (jsonrpc-request conn 'shutdown nil :timeout 5)
                                   (jsonrpc-notify conn 'exit nil))
                    (let ((proc (jsonrpc--process conn)))
                      (with-timeout (5 nil) (while (process-live-p proc) (accept-process-output proc 0.05))))
                    (jsonrpc-shutdown conn t))))
            (user-error (add 'error "%s" (string-remove-prefix "Garuda: " (error-message-string err)))))
          ;; What the chat's server said meanwhile (an MCP server that did not start, say).
          (dolist (w (reverse garuda--warnings))
            (add 'warn "chat's server said: %s" w))))
      (let* ((found (garuda--configured-model))
             (model (car found)))
        (if (not model)
            (add 'error "no model configured: set `garuda-model' (e.g. \"anthropic/claude-sonnet-4-5\") or put model = \"...\" in %s" (cdr found))
          (add 'ok "model: %s (from %s)" model (cdr found))
          (let* ((provider (cond ((string-prefix-p "replay:" model) "replay")
                                 ((string-match "\\`\\([^/]+\\)/" model) (match-string 1 model))
                                 ((string-prefix-p "claude" model) "anthropic")
                                 ((string-match-p "\\`\\(gpt\\|o[0-9]\\)" model) "openai")))
                 (key (cdr (assoc provider '(("anthropic" . "ANTHROPIC_API_KEY")
                                             ("openai" . "OPENAI_API_KEY"))))))
            (cond ((equal provider "replay")
                   (if (file-readable-p (substring model 7))
                       (add 'ok "replay cassette %s (offline, no key)" (substring model 7))
                     (add 'error "replay cassette not readable: %s" (substring model 7))))
                  (key (if (let ((v (getenv key))) (and v (not (string-empty-p v))))
                           (add 'ok "%s is set" key)
                         (add 'error "%s is not set: %s needs it; M-x setenv or add \"%s=...\" to `garuda-environment'" key model key)))
                  ((member provider '("ollama" "lmstudio" "llamacpp" "vllm"))
                   (add 'ok "%s runs locally: no key needed" provider))
                  (t (add 'warn "provider %s: its key is whatever config.toml names" provider)))))))
    (setq report (nreverse report))
    (with-current-buffer (get-buffer-create "*garuda doctor*")
      (let ((inhibit-read-only t))
        (erase-buffer)
        (dolist (r report)
          (insert (propertize (format "%-5s " (upcase (symbol-name (car r))))
                              'face (pcase (car r) ('ok 'success) ('warn 'warning) (_ 'error)))
                  (cdr r) "\n"))
        (special-mode))
      (when (called-interactively-p 'any) (display-buffer (current-buffer))))
    report))

(provide 'garuda)
;;; garuda.el ends here
